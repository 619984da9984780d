package throttle

import (
	"testing"

	"github.com/dropstream/dropstream/internal/rediskey"
)

// The keys are stored data: a change that fails here moves every bucket.
func TestKeys_keepTheirNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{BlockedKey, "ds:{notifier}:throttle:blocked"},
		{BlockedKey, rediskey.Key(rediskey.Tag("notifier"), "throttle", "blocked")},
		{DestinationKey("d1"), "ds:{notifier}:throttle:dest:d1"},
		{ChannelKey("email"), "ds:{notifier}:throttle:channel:email"},
	} {
		if tc.got != tc.want {
			t.Errorf("key %q, want %q", tc.got, tc.want)
		}
	}
}
