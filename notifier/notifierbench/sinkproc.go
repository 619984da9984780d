package notifierbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/dropstream/dropstream/internal/benchstat"
	"github.com/dropstream/dropstream/internal/progress"
)

// sinkProcess is the bench's end of the sink process (ServeSink): its URL
// and its commands over the process's stdin and stdout.
type sinkProcess struct{ *benchstat.Helper }

// do sends one command and reads its answer.
func (p *sinkProcess) do(cmd string) (sinkAnswer, error) {
	var a sinkAnswer
	if _, err := io.WriteString(p.In, cmd+"\n"); err != nil {
		return a, fmt.Errorf("bench notifier: sink process: %w", err)
	}
	line, err := p.Out.ReadBytes('\n')
	if err != nil {
		return a, fmt.Errorf("bench notifier: sink process: %w", err)
	}
	if err := json.Unmarshal(line, &a); err != nil {
		return a, fmt.Errorf("bench notifier: sink process answered %.200q: %w", line, err)
	}
	return a, nil
}

// waitFor waits until the sink has received n deliveries since its reset,
// and returns its counts then.
func (p *sinkProcess) waitFor(ctx context.Context, n int64, timeout time.Duration, ph *progress.Phase) (sinkStats, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var a sinkAnswer
	err := benchstat.Until(ctx, 5*time.Millisecond, func() (bool, error) {
		var err error
		a, err = p.do("stats")
		ph.Set(a.Received)
		return a.Received >= n, err
	})
	if err != nil {
		return a.sinkStats, fmt.Errorf("bench notifier: %d of %d deliveries received: %w", a.Received, n, err)
	}
	ph.Done("")
	return a.sinkStats, nil
}
