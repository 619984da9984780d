package notifierbench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/dropstream/dropstream/internal/progress"
)

// sinkProcess is the bench's end of the sink process (ServeSink): its URL
// and its commands over the process's stdin and stdout.
type sinkProcess struct {
	url string
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// startSink starts the sink process through self and reads its URL.
func startSink(ctx context.Context, self func(args ...string) *exec.Cmd) (*sinkProcess, error) {
	cmd := self(SinkArgs...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench notifier: sink process: %w", err)
	}
	p := &sinkProcess{cmd: cmd, in: in, out: bufio.NewReader(out)}
	line, err := p.out.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		p.close()
		return nil, fmt.Errorf("bench notifier: sink process answered %q: %v", line, err)
	}
	p.url = strings.TrimSpace(line)
	return p, ctx.Err()
}

// do sends one command and reads its answer.
func (p *sinkProcess) do(cmd string) (sinkAnswer, error) {
	var a sinkAnswer
	if _, err := io.WriteString(p.in, cmd+"\n"); err != nil {
		return a, fmt.Errorf("bench notifier: sink process: %w", err)
	}
	line, err := p.out.ReadBytes('\n')
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
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		a, err := p.do("stats")
		if err != nil {
			return a.sinkStats, err
		}
		ph.Set(a.Received)
		if a.Received >= n {
			ph.Done("")
			return a.sinkStats, nil
		}
		if time.Now().After(deadline) {
			return a.sinkStats, fmt.Errorf("bench notifier: %d of %d deliveries received before the deadline", a.Received, n)
		}
		select {
		case <-ctx.Done():
			return a.sinkStats, fmt.Errorf("bench notifier: %d of %d deliveries received: %w", a.Received, n, ctx.Err())
		case <-t.C:
		}
	}
}

// close ends the process: its stdin ends.
func (p *sinkProcess) close() {
	_ = p.in.Close()
	_ = p.cmd.Wait()
}
