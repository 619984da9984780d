package testenv

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTB records Fatal and Skip calls instead of ending the real test. Like
// the real ones, they end the calling goroutine, so run code under test with
// fakeTB.run.
type fakeTB struct {
	testing.TB
	mu      sync.Mutex
	failed  bool
	skipped bool
	msg     string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

func (f *fakeTB) Skipf(format string, args ...any) {
	f.mu.Lock()
	f.skipped, f.msg = true, fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// run calls fn(f) on a goroutine of its own and waits for it to end.
func (f *fakeTB) run(fn func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
}

func TestWaitFor_behaviour(t *testing.T) {
	tests := []struct {
		name     string
		trueFrom int // cond returns true from this call on; 0 = never
		timeout  time.Duration
		wantFail bool
	}{
		{name: "true at once", trueFrom: 1, timeout: time.Second},
		{name: "true after some polls", trueFrom: 5, timeout: 10 * time.Second},
		{name: "never true fails with message", trueFrom: 0, timeout: 20 * time.Millisecond, wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			cond := func() bool {
				calls++
				return tt.trueFrom > 0 && calls >= tt.trueFrom
			}
			f := &fakeTB{TB: t}
			f.run(func(tb testing.TB) { WaitFor(tb, tt.timeout, cond, "waiting for %s", "thing") })
			if f.failed != tt.wantFail {
				t.Fatalf("failed = %v, want %v (msg %q)", f.failed, tt.wantFail, f.msg)
			}
			if tt.wantFail && !strings.Contains(f.msg, "waiting for thing") {
				t.Errorf("message %q does not contain the caller's message", f.msg)
			}
			if !tt.wantFail && calls != tt.trueFrom {
				t.Errorf("cond called %d times, want %d", calls, tt.trueFrom)
			}
		})
	}
}

func TestStartRedis_missingBinarySkipsOrFails(t *testing.T) {
	tests := []struct {
		name     string
		require  string
		ci       string
		wantFail bool
	}{
		{name: "skip by default", wantFail: false},
		{name: "fail when required", require: "1", wantFail: true},
		{name: "fail on CI", ci: "true", wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvRequire, tt.require)
			t.Setenv("CI", tt.ci)
			f := &fakeTB{TB: t}
			f.run(func(tb testing.TB) {
				StartRedis(tb, RedisConfig{Binary: "/nonexistent/redis-server"})
			})
			if f.failed != tt.wantFail || f.skipped == tt.wantFail {
				t.Fatalf("failed=%v skipped=%v, want failed=%v (msg %q)", f.failed, f.skipped, tt.wantFail, f.msg)
			}
			if !tt.wantFail && !strings.Contains(f.msg, "make test") {
				t.Errorf("skip message %q does not mention make test", f.msg)
			}
		})
	}
}

func TestClickHouseDSN_unsetSkipsOrFails(t *testing.T) {
	tests := []struct {
		name     string
		require  string
		wantFail bool
	}{
		{name: "skip by default"},
		{name: "fail when required", require: "1", wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvClickHouseDSN, "")
			t.Setenv(EnvRequire, tt.require)
			t.Setenv("CI", "")
			f := &fakeTB{TB: t}
			f.run(func(tb testing.TB) { ClickHouseDSN(tb) })
			if f.failed != tt.wantFail || f.skipped == tt.wantFail {
				t.Fatalf("failed=%v skipped=%v, want failed=%v (msg %q)", f.failed, f.skipped, tt.wantFail, f.msg)
			}
		})
	}
}

func TestRedisConfig_Validate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     RedisConfig
		wantErr bool
	}{
		{name: "zero value", cfg: RedisConfig{}},
		{name: "aof always", cfg: RedisConfig{AppendOnly: true, AppendFsync: "always"}},
		{name: "bad fsync", cfg: RedisConfig{AppendOnly: true, AppendFsync: "sometimes"}, wantErr: true},
		{name: "negative timeout", cfg: RedisConfig{StartTimeout: -time.Second}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestFreePort_isBindable(t *testing.T) {
	p := FreePort(t)
	if p <= 0 || p > 65535 {
		t.Fatalf("FreePort() = %d", p)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("listen on free port %d: %v", p, err)
	}
	l.Close()
}
