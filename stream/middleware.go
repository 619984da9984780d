package stream

import "context"

// Handler processes one message. Its error decides the message's fate; see
// the package documentation and Classify.
type Handler func(ctx context.Context, msg *Message) error

// Middleware wraps a Handler with one concern.
type Middleware func(next Handler) Handler

// Chain applies middlewares so that the first one is the outermost.
func Chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}
