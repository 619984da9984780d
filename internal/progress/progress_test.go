package progress_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dropstream/dropstream/internal/progress"
)

// TestPrinter_plainWritesTwoLinesPerPhase updates a phase many times on a
// non-terminal writer: it writes its start and its end with the count and
// figure, nothing per update.
func TestPrinter_plainWritesTwoLinesPerPhase(t *testing.T) {
	for _, tc := range []struct {
		name      string
		total     int64
		wantStart string
		wantEnd   string
	}{
		{"known total", 200000, "publish: started, 200000 to do", "publish: done, 200000/200000 in "},
		{"unknown total", 0, "publish: started", "publish: done, 200000 in "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			p := progress.NewWith(&buf, false)
			ph := p.Start("publish", tc.total)
			for i := int64(1); i <= 200000; i += 100 {
				ph.Set(i + 99)
			}
			ph.Done("612000 msg/s")
			ph.Done("again")
			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			if len(lines) != 2 {
				t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
			}
			if lines[0] != tc.wantStart || !strings.HasPrefix(lines[1], tc.wantEnd) || !strings.HasSuffix(lines[1], ", 612000 msg/s") {
				t.Errorf("lines %q, want %q then %q…, 612000 msg/s", lines, tc.wantStart, tc.wantEnd)
			}
		})
	}
}

// TestPrinter_terminalDrawsABarOfTheCounts forces terminal mode on a
// buffer: the output redraws a bar with the phase's name and its counts.
func TestPrinter_terminalDrawsABarOfTheCounts(t *testing.T) {
	var buf bytes.Buffer
	p := progress.NewWith(&buf, true)
	ph := p.Start("consume", 1000)
	ph.Add(400)
	ph.Add(600)
	ph.Done("1000 msg/s")
	out := buf.String()
	for _, want := range []string{"consume", "100%", "(1000/1000", "\r", "consume: 1000 msg/s\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("bar output lacks %q:\n%q", want, out)
		}
	}
}

// TestPrinter_nilPrintsNothing checks that library code may pass a nil
// Printer.
func TestPrinter_nilPrintsNothing(t *testing.T) {
	var p *progress.Printer
	ph := p.Start("x", 10)
	ph.Add(1)
	ph.Done("y")
	p.With("w").Start("v", 1).Done("")
}

// TestNew_bufferIsNotATerminal checks that New writes plain lines to a
// writer that is not a terminal.
func TestNew_bufferIsNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	progress.New(&buf).Start("phase", 3).Done("")
	if got := buf.String(); !strings.HasPrefix(got, "phase: started, 3 to do\nphase: done, 0/3 in ") {
		t.Errorf("got %q", got)
	}
}
