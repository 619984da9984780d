package stream_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/stream"
)

// The fault tests run consumers as real processes: this test binary,
// re-executed with DROPSTREAM_FAULT_CONSUMER set, runs one stage copy and
// applies each message's effect once through the ledger.
const (
	envConsumer = "DROPSTREAM_FAULT_CONSUMER"
	envURL      = "DROPSTREAM_FAULT_REDIS"
	envFlow     = "DROPSTREAM_FAULT_FLOW"
	envDelay    = "DROPSTREAM_FAULT_DELAY"
	envPoison   = "DROPSTREAM_FAULT_POISON"
	envStall    = "DROPSTREAM_FAULT_STALL"
	envLease    = "DROPSTREAM_FAULT_LEASE" // the copy's ConsumerLease; empty: the default
	envTag      = "DROPSTREAM_FAULT_TAG"   // when set, messages handled are counted under it too
	faultParts  = 2
)

func TestMain(m *testing.M) {
	if name := os.Getenv(envConsumer); name != "" {
		os.Exit(runFaultConsumer(name))
	}
	os.Exit(m.Run())
}

// runFaultConsumer is the consumer process. A message whose payload equals
// the poison value kills the process, as a crashing bug would.
func runFaultConsumer(name string) int {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rdb, err := stream.Dial(ctx, os.Getenv(envURL))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	topic := stream.NewTopic(os.Getenv(envFlow), "work", faultParts)
	delay, _ := time.ParseDuration(os.Getenv(envDelay))
	poison, stall, tag := os.Getenv(envPoison), os.Getenv(envStall), os.Getenv(envTag)
	lease, _ := time.ParseDuration(os.Getenv(envLease))
	ledger, _ := stream.NewLedger(rdb, stream.LedgerConfig{Name: "fault"})
	effect := stream.NewEffect(`return redis.call('HINCRBY', KEYS[1], ARGV[1], 1)`)
	r, err := stream.NewRunner(rdb, stream.Stage{Name: "work", Topic: topic,
		Config: stream.RunnerConfig{Consumer: name, ConsumerLease: lease, BatchSize: 50, Block: 100 * time.Millisecond,
			ClaimInterval: 100 * time.Millisecond, ClaimIdle: time.Second, HandlerTimeout: 500 * time.Millisecond,
			MaxDeliveries: 3, ErrorBackoff: 200 * time.Millisecond, Retry: stream.RetryConfig{Disabled: true}},
		Handler: func(ctx context.Context, m *stream.Message) error {
			p := string(m.Payload)
			hashTag := topic.HashTag(m.Partition)
			if err := rdb.HIncrBy(ctx, "ds:"+hashTag+":fault:calls", p, 1).Err(); err != nil {
				return err
			}
			switch {
			case poison != "" && p == poison:
				os.Exit(3)
			case stall != "" && p == stall:
				select {} // hangs mid-batch until the process is killed
			}
			time.Sleep(delay) // simulated work
			_, _, err := ledger.Apply(ctx, effect, ledger.Key(hashTag, p), []string{"ds:" + hashTag + ":fault:effects"}, p)
			if err == nil && tag != "" {
				err = rdb.HIncrBy(ctx, "ds:"+hashTag+":fault:by:"+tag, p, 1).Err()
			}
			return err
		}}, stream.Telemetry{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	go func() {
		// The parent closes stdin to ask for a graceful stop.
		_, _ = os.Stdin.Read(make([]byte, 1))
		stop()
	}()
	if err := r.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// consumerProc is a consumer process under test.
type consumerProc struct {
	cmd   *exec.Cmd
	stdin io.Closer
	log   *prefixWriter
	done  chan struct{}
}

// consumerOpts are the behaviours of a consumer process.
type consumerOpts struct {
	delay  time.Duration // per message
	poison string        // payload that kills the process
	stall  string        // payload whose handler never returns
	lease  time.Duration // ConsumerLease; 0: the default
	tag    string        // counts what the process handled under this tag (see handledBy)
}

func startConsumer(t *testing.T, url, flow, name string, o consumerOpts) *consumerProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envConsumer+"="+name, envURL+"="+url, envFlow+"="+flow,
		envDelay+"="+o.delay.String(), envPoison+"="+o.poison, envStall+"="+o.stall, envLease+"="+o.lease.String(), envTag+"="+o.tag)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	log := &prefixWriter{t: t, prefix: name}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &consumerProc{cmd: cmd, stdin: stdin, log: log, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.kill()
		}
		select {
		case <-p.done:
		default:
			p.kill()
		}
	})
	return p
}

func (p *consumerProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *consumerProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process to stop gracefully and waits for it to exit.
func (p *consumerProc) stop() {
	_ = p.stdin.Close()
	<-p.done
}

// logged reports whether the process has logged a line containing s.
func (p *consumerProc) logged(s string) bool {
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	return strings.Contains(p.log.all.String(), s)
}

type prefixWriter struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	all    strings.Builder // everything written, for logged
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.all.Write(b)
	w.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") || !strings.HasPrefix(line, "time=") {
			w.t.Logf("[%s] %s", w.prefix, line)
		}
	}
	return len(b), nil
}

// faultState reads effects and handler calls per payload over all partitions.
func faultState(t *testing.T, rdb redis.UniversalClient, topic stream.Topic) (effects, calls map[string]int) {
	t.Helper()
	effects, calls = map[string]int{}, map[string]int{}
	for p := 0; p < topic.Partitions; p++ {
		tag := topic.HashTag(p)
		for key, into := range map[string]map[string]int{"ds:" + tag + ":fault:effects": effects, "ds:" + tag + ":fault:calls": calls} {
			m, err := rdb.HGetAll(context.Background(), key).Result()
			if err != nil {
				continue // Redis may be restarting; callers poll
			}
			for k, v := range m {
				n, _ := strconv.Atoi(v)
				into[k] += n
			}
		}
	}
	return effects, calls
}

func faultTopic(t *testing.T) stream.Topic {
	return stream.NewTopic("fault"+strconv.FormatInt(time.Now().UnixNano()%1e9, 36), "work", faultParts)
}

func publishRange(t *testing.T, rdb redis.UniversalClient, topic stream.Topic, from, to int) {
	t.Helper()
	msgs := make([]*stream.Message, 0, to-from)
	for i := from; i < to; i++ {
		msgs = append(msgs, stream.NewMessage("k"+strconv.Itoa(i%17), "fault", []byte(strconv.Itoa(i))))
	}
	if err := stream.NewPublisher(rdb, stream.Telemetry{}).Publish(context.Background(), topic, msgs...); err != nil {
		t.Fatal(err)
	}
}

// assertExactlyOnce checks every payload in [0, n) has exactly one effect.
func assertExactlyOnce(t *testing.T, effects map[string]int, n int, skip map[string]bool) {
	t.Helper()
	for i := 0; i < n; i++ {
		p := strconv.Itoa(i)
		want := 1
		if skip[p] {
			want = 0
		}
		if effects[p] != want {
			t.Errorf("payload %s has %d effects, want %d", p, effects[p], want)
		}
	}
	if len(effects) != n-len(skip) {
		t.Errorf("%d payloads have effects, want %d", len(effects), n-len(skip))
	}
}

func sum(m map[string]int) int {
	total := 0
	for _, v := range m {
		total += v
	}
	return total
}
