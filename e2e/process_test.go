package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/testenv"
)

// buildBinary builds cmd/dropstream once for the test, from the module
// root, into the test's temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "dropstream")
	build := exec.Command("go", "build", "-o", bin, "./cmd/dropstream")
	build.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/dropstream: %v\n%s", err, msg)
	}
	return bin
}

// proc is one dropstream process under test.
type proc struct {
	name string
	cmd  *exec.Cmd
	logs *procLog
	done chan struct{}
}

// startProc starts bin with args; the process is stopped when the test
// ends. Variables DROPSTREAM_* of the test's environment are not passed
// on (except DROPSTREAM_TEST_*), so only the flags configure it, but for
// DROPSTREAM_EGRESS_ALLOW, which allows the loopback addresses: the
// tests' providers and receivers listen there.
func startProc(t *testing.T, bin, name string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, bin, name, nil, args...)
}

// startProcEnv is startProc with the variables env ("NAME=value") set too.
func startProcEnv(t *testing.T, bin, name string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DROPSTREAM_") || strings.HasPrefix(kv, "DROPSTREAM_TEST_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "DROPSTREAM_EGRESS_ALLOW=127.0.0.0/8,::1")
	cmd.Env = append(cmd.Env, env...)
	logs := &procLog{t: t, name: name, started: map[string]bool{}, paused: map[string]bool{}, warned: map[string][]map[string]any{}}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: fmt.Sprintf("%s (pid %d)", name, cmd.Process.Pid), cmd: cmd, logs: logs, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.stop)
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// kill ends the process with SIGKILL, like a crash, and waits for it.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// stop resumes the process if it was stopped and ends it with SIGTERM
// (SIGKILL after 10s).
func (p *proc) stop() {
	if p.exited() {
		return
	}
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

// freeze stops the process with SIGSTOP and waits until the kernel reports
// it stopped.
func (p *proc) freeze(t *testing.T) {
	t.Helper()
	testenv.Freeze(t, p.cmd.Process)
}

func (p *proc) resume() { p.signal(syscall.SIGCONT) }

// consumerOf reports whether name is a consumer of process pid:
// stream.DefaultConsumerName is "<hostname>-<pid>-<random>".
func consumerOf(name string, pid int) bool {
	return strings.Contains(name, "-"+strconv.Itoa(pid)+"-")
}

// waitStarted waits until the process has logged "stage started" for every
// stage: its consumer groups exist and it is about to read them.
func (p *proc) waitStarted(t *testing.T, stages ...string) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, func() bool {
		p.logs.mu.Lock()
		defer p.logs.mu.Unlock()
		for _, s := range stages {
			if !p.logs.started[s] {
				return false
			}
		}
		return true
	}, "%s started %v", p.name, stages)
}

// waitPaused waits until the process has logged that stage's copies
// stopped reading.
func (p *proc) waitPaused(t *testing.T, stage string) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, func() bool {
		p.logs.mu.Lock()
		defer p.logs.mu.Unlock()
		return p.logs.paused[stage]
	}, "%s paused %s", p.name, stage)
}

// pendingOf returns, per group, the entries delivered to process pid and
// not acknowledged, in one round trip.
func pendingOf(ctx context.Context, rdb redis.UniversalClient, pid int, groups ...group) (map[string]int64, error) {
	pipe := rdb.Pipeline()
	var cmds []*redis.XPendingCmd
	for _, g := range groups {
		for p := 0; p < g.topic.Partitions; p++ {
			cmds = append(cmds, pipe.XPending(ctx, g.topic.Stream(p), g.name))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	i := 0
	for _, g := range groups {
		for p := 0; p < g.topic.Partitions; p++ {
			for name, n := range cmds[i].Val().Consumers {
				if consumerOf(name, pid) {
					out[g.name] += n
				}
			}
			i++
		}
	}
	return out, nil
}

func total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// procLog forwards a process's warnings, errors and claims to the test
// log, up to a limit, and notes the stages it started.
type procLog struct {
	t    *testing.T
	name string

	mu      sync.Mutex
	partial []byte
	shown   int
	started map[string]bool
	paused  map[string]bool             // stages whose every partition stopped reading
	warned  map[string][]map[string]any // the fields of each warning or error, by message
}

// warnings returns the fields of each warning or error logged with
// message msg.
func (l *procLog) warnings(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]map[string]any(nil), l.warned[msg]...)
}

const maxLogLines = 25

func (l *procLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		var rec struct{ Msg, Stage, Level string }
		if json.Unmarshal([]byte(line), &rec) == nil {
			switch rec.Msg {
			case "stage started":
				l.started[rec.Stage] = true
			case "stage paused: every partition stopped reading":
				l.paused[rec.Stage] = true
			}
			var fields map[string]any
			if (rec.Level == "WARN" || rec.Level == "ERROR") && json.Unmarshal([]byte(line), &fields) == nil {
				l.warned[rec.Msg] = append(l.warned[rec.Msg], fields)
			}
		}
		if !strings.Contains(line, `"level":"WARN"`) && !strings.Contains(line, `"level":"ERROR"`) &&
			!strings.Contains(line, "claiming") && strings.HasPrefix(line, "{") {
			continue
		}
		if l.shown++; l.shown <= maxLogLines {
			l.t.Logf("[%s] %s", l.name, line)
		} else if l.shown == maxLogLines+1 {
			l.t.Logf("[%s] (more lines not shown)", l.name)
		}
	}
}
