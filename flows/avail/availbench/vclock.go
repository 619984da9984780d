package availbench

import (
	"sync"
	"time"
)

// vclock is a collector.Clock on virtual time, Scale times faster, that
// can jump ahead, so a day of polling runs in seconds.
type vclock struct {
	scale float64
	done  <-chan struct{}

	mu     sync.Mutex
	real0  time.Time
	virt0  time.Time
	jumped chan struct{} // closed and replaced at each jump
}

func newVClock(start time.Time, scale float64, done <-chan struct{}) *vclock {
	return &vclock{scale: scale, done: done, real0: time.Now(), virt0: start, jumped: make(chan struct{})}
}

// Now returns the virtual time.
func (c *vclock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked()
}

func (c *vclock) nowLocked() time.Time {
	return c.virt0.Add(time.Duration(float64(time.Since(c.real0)) * c.scale))
}

// JumpTo moves the virtual time to t, if later, and fires the alarms it
// reaches.
func (c *vclock) JumpTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.After(c.nowLocked()) {
		return
	}
	c.real0, c.virt0 = time.Now(), t
	close(c.jumped)
	c.jumped = make(chan struct{})
}

// Alarm returns a channel that receives once the virtual time reaches t.
func (c *vclock) Alarm(t time.Time) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		for {
			c.mu.Lock()
			now, jumped := c.nowLocked(), c.jumped
			c.mu.Unlock()
			if !t.After(now) {
				ch <- now
				return
			}
			timer := time.NewTimer(time.Duration(float64(t.Sub(now)) / c.scale))
			select {
			case <-timer.C:
			case <-jumped:
				timer.Stop()
			case <-c.done:
				timer.Stop()
				return
			}
		}
	}()
	return ch
}
