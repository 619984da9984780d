package email

// The helpers of the package's tests, for its external tests (those that
// run the channel through the notifier, which imports this package).
var (
	StartServer    = startServer
	NewTestChannel = newChannel
)
