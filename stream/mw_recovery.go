package stream

import (
	"context"
	"fmt"
	"runtime/debug"
)

// PanicError is the error a recovered handler panic becomes.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panic: %v", e.Value) }

// Recovery turns a handler panic into a *PanicError, retried and
// dead-lettered like any failure, so one bad message cannot stop the stage.
func Recovery() Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = &PanicError{Value: r, Stack: debug.Stack()}
				}
			}()
			return next(ctx, msg)
		}
	}
}
