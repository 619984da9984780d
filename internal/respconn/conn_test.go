package respconn

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/auth"

	"github.com/dropstream/dropstream/internal/testenv"
)

// dial returns a Conn with the options of client, closed when the test
// ends.
func dial(t *testing.T, opt *redis.Options) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), opt)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestConn_pipelinesCommandsAndReturnsRawReplies(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t).(*redis.Client)
			c := dial(t, rdb.Options())
			big := strings.Repeat("x", 300<<10) // several socket reads, and a grown buffer
			replies, err := c.Do(context.Background(),
				[]any{"set", "k", big}, []any{"get", "k"}, []any{"incrby", "n", 7}, []any{"hget", "k", "f"}, []any{"get", "missing"})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"+OK\r\n", "$307200\r\n" + big + "\r\n", ":7\r\n", "", "$-1\r\n"}
			for i, r := range replies {
				if i == 3 {
					if err := ReplyError(r); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
						t.Errorf("reply %d = %.60q, want a WRONGTYPE error", i, r)
					}
					continue
				}
				if string(r) != want[i] {
					t.Errorf("reply %d = %.60q, want %.60q", i, r, want[i])
				}
			}
			// The key went to the client's own database.
			if got, err := rdb.IncrBy(context.Background(), "n", 1).Result(); err != nil || got != 8 {
				t.Fatalf("INCRBY n through go-redis = %d, %v; want 8", got, err)
			}
			// An error reply leaves the connection usable.
			if r, err := c.Do(context.Background(), []any{"ping"}); err != nil || string(r[0]) != "+PONG\r\n" {
				t.Fatalf("PING after an error reply = %q, %v", r, err)
			}
			if c.Broken() != nil {
				t.Fatalf("Broken() = %v", c.Broken())
			}
		})
	}
}

func TestConn_authenticatesAsTheClientDoes(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	ctx := context.Background()
	if err := admin.Do(ctx, "acl", "setuser", "reader", "on", ">pw1", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ConfigSet(ctx, "requirepass", "pw0").Err(); err != nil {
		t.Fatal(err)
	}
	mr := miniredis.RunT(t)
	mr.RequireUserAuth("reader", "pw1")
	for _, tc := range []struct {
		name string
		opt  redis.Options
		ok   bool
	}{
		{"password", redis.Options{Addr: srv.Addr(), Password: "pw0"}, true},
		{"user", redis.Options{Addr: srv.Addr(), Username: "reader", Password: "pw1", DB: 2}, true},
		{"provider", redis.Options{Addr: srv.Addr(), CredentialsProvider: func() (string, string) { return "reader", "pw1" }}, true},
		{"wrong password", redis.Options{Addr: srv.Addr(), Password: "nope"}, false},
		{"none", redis.Options{Addr: srv.Addr()}, false},
		{"miniredis user", redis.Options{Addr: mr.Addr(), Username: "reader", Password: "pw1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(ctx, &tc.opt)
			if err == nil {
				defer c.Close()
				var r [][]byte
				if r, err = c.Do(ctx, []any{"set", "k", "v"}); err == nil {
					err = ReplyError(r[0])
				}
			}
			if (err == nil) != tc.ok {
				t.Fatalf("dial and SET: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// blocked waits until the server has a client blocked in a command.
func blocked(t *testing.T, rdb *redis.Client) {
	testenv.WaitFor(t, 10*time.Second, func() bool {
		info, err := rdb.Info(context.Background(), "clients").Result()
		return err == nil && !strings.Contains(info, "blocked_clients:0")
	}, "no client blocked")
}

func TestConn_contextEndingCutsABlockedReadShort(t *testing.T) {
	// A server of its own: blocked() counts every blocked client.
	rdb := testenv.Dial(t, testenv.StartRedis(t, testenv.RedisConfig{}).URL()).(*redis.Client)
	c := dial(t, rdb.Options())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Do(ctx, []any{"blpop", "nothing", 30})
		done <- err
	}()
	blocked(t, rdb)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Do = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Do still blocked 10s after its context ended")
	}
	if c.Broken() == nil {
		t.Fatal("the connection is not broken after a cut read")
	}
	if _, err := c.Do(context.Background(), []any{"ping"}); err == nil {
		t.Fatal("a broken connection answered")
	}
}

func TestConn_readTimeoutBreaksTheConnection(t *testing.T) {
	rdb := testenv.Dial(t, testenv.RedisURL(t)).(*redis.Client)
	opt := *rdb.Options()
	opt.ReadTimeout = 300 * time.Millisecond
	c := dial(t, &opt)
	_, err := c.Do(context.Background(), []any{"blpop", "nothing", 30})
	var ne interface{ Timeout() bool }
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Do = %v, want a timeout", err)
	}
	if c.Broken() == nil {
		t.Fatal("the connection is not broken after a timeout")
	}
}

func TestConn_rejectsArgumentsItCannotSend(t *testing.T) {
	rdb := testenv.Dial(t, testenv.RedisURL(t)).(*redis.Client)
	c := dial(t, rdb.Options())
	if _, err := c.Do(context.Background(), []any{"set", "k", struct{}{}}); err == nil {
		t.Fatal("Do sent a struct")
	}
	r, err := c.Do(context.Background(), []any{"echo", []byte("a\r\nb")}, []any{"echo", 1.5})
	if err != nil || !bytes.Equal(r[0], []byte("$4\r\na\r\nb\r\n")) || string(r[1]) != "$3\r\n1.5\r\n" {
		t.Fatalf("Do after a refused argument = %q, %v", r, err)
	}
}

func TestDial_refusesStreamingCredentials(t *testing.T) {
	opt := &redis.Options{Addr: "127.0.0.1:1", StreamingCredentialsProvider: streaming{}}
	if _, err := Dial(context.Background(), opt); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Dial = %v, want ErrUnsupported", err)
	}
}

type streaming struct{}

func (streaming) Subscribe(auth.CredentialsListener) (auth.Credentials, auth.UnsubscribeFunc, error) {
	return nil, func() error { return nil }, errors.New("unused")
}

func TestConn_dropsAHugeBufferAfterItsReply(t *testing.T) {
	rdb := testenv.Dial(t, testenv.RedisURL(t)).(*redis.Client)
	c := dial(t, rdb.Options())
	huge := strings.Repeat("y", maxKept+1)
	r, err := c.Do(context.Background(), []any{"set", "huge", huge}, []any{"get", "huge"})
	if err != nil || len(r[1]) != len(huge)+len("$4194305\r\n\r\n") {
		t.Fatalf("GET huge: %d bytes, %v", len(r[1]), err)
	}
	if r, err := c.Do(context.Background(), []any{"ping"}); err != nil || string(r[0]) != "+PONG\r\n" {
		t.Fatalf("PING = %q, %v", r, err)
	}
	if cap(c.in) > maxKept {
		t.Fatalf("the connection keeps a %d-byte buffer after a small reply", cap(c.in))
	}
}
