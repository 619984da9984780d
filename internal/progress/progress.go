// Package progress shows the progress of long command-line work: a bar on
// a terminal, else a line at each phase's start and end.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Printer starts phases on one writer. A nil *Printer prints nothing, so
// library code can take one optionally.
type Printer struct {
	w        io.Writer
	terminal bool
	prefix   string
}

// New returns a Printer on w that draws bars when w is a terminal.
func New(w io.Writer) *Printer {
	f, ok := w.(*os.File)
	return NewWith(w, ok && term.IsTerminal(int(f.Fd())))
}

// NewWith returns a Printer on w that draws bars if terminal is true and
// writes plain lines otherwise.
func NewWith(w io.Writer, terminal bool) *Printer { return &Printer{w: w, terminal: terminal} }

// With returns a Printer on the same writer whose phase names start
// with prefix (a round, a mode).
func (p *Printer) With(prefix string) *Printer {
	if p == nil {
		return nil
	}
	return &Printer{w: p.w, terminal: p.terminal, prefix: p.prefix + prefix}
}

// Printf writes a line of its own, indented; a nil *Printer prints
// nothing.
func (p *Printer) Printf(format string, args ...any) {
	if p != nil {
		fmt.Fprintln(p.w, "  ", p.prefix+fmt.Sprintf(format, args...))
	}
}

// Phase is one stretch of work of a known total (0: unknown). Its methods
// are safe for concurrent use and do nothing on a nil *Phase.
type Phase struct {
	p     *Printer
	name  string
	total int64
	begin time.Time
	bar   *progressbar.ProgressBar

	mu   sync.Mutex
	n    int64
	done bool
}

// Start begins a phase named name of total units; on a plain writer it
// writes the phase's start line.
func (p *Printer) Start(name string, total int64) *Phase {
	if p == nil {
		return nil
	}
	name = p.prefix + name
	ph := &Phase{p: p, name: name, total: total, begin: time.Now()}
	if p.terminal {
		max := total
		if max <= 0 {
			max = -1 // the library's unknown total: a counter, no percentage
		}
		ph.bar = progressbar.NewOptions64(max,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(name),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionShowElapsedTimeOnFinish(),
		)
		return ph
	}
	if total > 0 {
		fmt.Fprintf(p.w, "%s: started, %d to do\n", name, total)
	} else {
		fmt.Fprintf(p.w, "%s: started\n", name)
	}
	return ph
}

// Set records that n units are done.
func (ph *Phase) Set(n int64) { ph.open(func() { ph.set(n) }) }

// Add records n more units done.
func (ph *Phase) Add(n int64) { ph.open(func() { ph.set(ph.n + n) }) }

// set records n under the lock.
func (ph *Phase) set(n int64) {
	ph.n = n
	if ph.bar != nil {
		_ = ph.bar.Set64(n)
	}
}

// open runs fn under the phase's lock unless the phase is nil or done.
func (ph *Phase) open(fn func()) {
	if ph == nil {
		return
	}
	ph.mu.Lock()
	defer ph.mu.Unlock()
	if !ph.done {
		fn()
	}
}

// Done ends the phase with its figure (may be empty); later calls do
// nothing.
func (ph *Phase) Done(figure string) {
	ph.open(func() {
		ph.done = true
		if ph.bar != nil {
			if ph.total > 0 {
				_ = ph.bar.Set64(ph.n)
			}
			_ = ph.bar.Finish()
			fmt.Fprintln(ph.p.w)
			if figure != "" {
				fmt.Fprintf(ph.p.w, "%s: %s\n", ph.name, figure)
			}
			return
		}
		line := fmt.Sprintf("%s: done, %d", ph.name, ph.n)
		if ph.total > 0 {
			line += fmt.Sprintf("/%d", ph.total)
		}
		line += " in " + time.Since(ph.begin).Round(time.Millisecond).String()
		if figure != "" {
			line += ", " + figure
		}
		fmt.Fprintln(ph.p.w, line)
	})
}
