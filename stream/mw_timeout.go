package stream

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Timeout bounds each handler call with a context deadline of d; handlers
// must honour their context. The context behaves as context.WithTimeout's
// would, without a runtime timer per call: one timer per middleware, armed
// for the earliest deadline in progress, ends the calls (see tryContext).
func Timeout(d time.Duration) Middleware {
	w := &watchdog{d: d}
	w.timer = time.AfterFunc(d, w.fire)
	w.timer.Stop()
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *Message) error {
			c := w.start(ctx)
			defer w.finish(c)
			return next(c, msg)
		}
	}
}

// watchdog ends the calls of one Timeout middleware past their deadline.
// All calls last d, so the calls in progress, in start order, are in
// deadline order: the timer is armed for the first.
type watchdog struct {
	d          time.Duration
	mu         sync.Mutex
	head, tail *tryContext // calls in progress, oldest first
	timer      *time.Timer
	armed      bool
}

// start returns the context of a call starting now under parent.
func (w *watchdog) start(parent context.Context) *tryContext {
	c := &tryContext{parent: parent}
	w.mu.Lock()
	c.expires = time.Now().Add(w.d)
	c.prev = w.tail
	if w.tail != nil {
		w.tail.next = c
	} else {
		w.head = c
	}
	w.tail = c
	c.listed = true
	if !w.armed {
		w.armed = true
		w.timer.Reset(w.d)
	}
	w.mu.Unlock()
	c.deadline = c.expires
	if pd, ok := parent.Deadline(); ok && pd.Before(c.deadline) {
		c.deadline = pd
	}
	return c
}

// finish ends a call that returned.
func (w *watchdog) finish(c *tryContext) {
	w.mu.Lock()
	w.unlink(c)
	w.mu.Unlock()
	c.end(context.Canceled)
}

// fire ends the calls whose deadline has passed and arms the timer for the
// next one.
func (w *watchdog) fire() {
	var expired []*tryContext
	w.mu.Lock()
	now := time.Now()
	for w.head != nil && !w.head.expires.After(now) {
		c := w.head
		w.unlink(c)
		expired = append(expired, c)
	}
	if w.head != nil {
		w.timer.Reset(w.head.expires.Sub(now))
	} else {
		w.armed = false
	}
	w.mu.Unlock()
	for _, c := range expired {
		c.end(context.DeadlineExceeded)
	}
}

// unlink takes c out of the calls in progress; w.mu is held.
func (w *watchdog) unlink(c *tryContext) {
	if !c.listed {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		w.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		w.tail = c.prev
	}
	c.prev, c.next, c.listed = nil, nil, false
}

// tryContext is the context of one handler call under Timeout. It makes its
// Done channel, and watches its parent, only when asked; its AfterFunc makes
// derived contexts end with its own error, as under context.WithTimeout.
// Value, and so context.Cause, go to the parent.
type tryContext struct {
	parent   context.Context
	deadline time.Time // reported: the earlier of expires and the parent's
	expires  time.Time // when the watchdog ends the call

	prev, next *tryContext // the watchdog's list, under its mu
	listed     bool

	err     atomic.Pointer[error]
	mu      sync.Mutex
	done    chan struct{}
	funcs   []*func()
	unwatch func() bool // stops watching the parent
}

func (c *tryContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *tryContext) Value(key any) any { return c.parent.Value(key) }

func (c *tryContext) Err() error {
	if err := c.err.Load(); err != nil {
		return *err
	}
	if err := c.parent.Err(); err != nil {
		c.end(err)
		return c.Err()
	}
	return nil
}

func (c *tryContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err.Load() != nil {
			close(c.done)
		} else {
			c.watchParent()
		}
	}
	return c.done
}

// AfterFunc arranges for f to run in its own goroutine once c ends, as
// context.AfterFunc does; stop reports whether it kept f from running.
func (c *tryContext) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err.Load() != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	p := &f
	c.funcs = append(c.funcs, p)
	c.watchParent()
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		i := slices.Index(c.funcs, p)
		if i >= 0 {
			c.funcs = slices.Delete(c.funcs, i, i+1)
		}
		return i >= 0
	}
}

// watchParent ends c when its parent ends; c.mu is held.
func (c *tryContext) watchParent() {
	if c.unwatch != nil || c.parent.Done() == nil {
		return
	}
	c.unwatch = context.AfterFunc(c.parent, func() { c.end(c.parent.Err()) })
}

// end ends c with err, unless it has ended already.
func (c *tryContext) end(err error) {
	c.mu.Lock()
	if c.err.Load() != nil {
		c.mu.Unlock()
		return
	}
	c.err.Store(&err)
	if c.done != nil {
		close(c.done)
	}
	funcs, unwatch := c.funcs, c.unwatch
	c.funcs, c.unwatch = nil, nil
	c.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
	for _, f := range funcs {
		go (*f)()
	}
}

func (c *tryContext) String() string { return "stream.Timeout" }
