package checkout_test

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// replyDropper is a TCP proxy to a Redis that, once armed with a marker,
// passes on the next request containing it and then closes that
// connection instead of passing the reply on: the command ran, and its
// caller hears only that the connection ended.
type replyDropper struct {
	ln      net.Listener
	target  string
	marker  atomic.Pointer[[]byte]
	dropped atomic.Int64
}

func startReplyDropper(t *testing.T, target string) *replyDropper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &replyDropper{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
	return p
}

// arm has the proxy drop the reply to the next request containing marker.
func (p *replyDropper) arm(marker string) {
	m := []byte(marker)
	p.marker.Store(&m)
}

// pipe relays one client connection. A client of go-redis waits for a
// reply before it sends the next command on a connection, so the first
// bytes from the server after a marked request are its reply.
func (p *replyDropper) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	closeBoth := func() { _ = client.Close(); _ = server.Close() }
	defer closeBoth()
	var drop atomic.Bool
	go func() {
		defer closeBoth()
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if m := p.marker.Load(); m != nil && bytes.Contains(buf[:n], *m) && p.marker.CompareAndSwap(m, nil) {
					drop.Store(true)
				}
				if _, err := server.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			if drop.Load() {
				p.dropped.Add(1)
				return
			}
			if _, err := client.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestStore_changeWhoseReplyIsLostIsAppliedOnce sends each change of the
// contract (stock add and subtract, add funds, pay, add item) through a
// proxy that lets Redis run it and then cuts the connection before its
// reply: the call, tried again, answers the change once, and the stored
// amount shows it applied once.
func TestStore_changeWhoseReplyIsLostIsAppliedOnce(t *testing.T) {
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := startReplyDropper(t, opts.Addr)
	opts.Addr = proxy.ln.Addr().String()
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	tel := stream.Telemetry{Logger: quiet()}
	f, err := checkout.NewWith(rdb, stream.NewPublisher(rdb, tel), checkout.Config{Partitions: partitions}, tel)
	if err != nil {
		t.Fatal(err)
	}
	st, ctx := f.Store(), context.Background()
	item, err := st.CreateItemOf(ctx, tenancy.Open, 7)
	if err != nil {
		t.Fatal(err)
	}
	user, err := st.CreateUserOf(ctx, tenancy.Open)
	if err != nil {
		t.Fatal(err)
	}
	order, err := st.CreateOrder(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	// The first changes load the scripts: a lost reply must be that of a
	// script that ran, not of one the server lacked.
	for _, err := range []error{second(st.AddStock(ctx, item, 100)), second(st.AddFunds(ctx, user, 100)), second(st.AddItem(ctx, order, item, 1))} {
		if err != nil {
			t.Fatal(err)
		}
	}
	stock := func() int64 { n, _, err := st.FindItem(ctx, item); must(t, err); return n }
	credit := func() int64 { n, err := st.FindUser(ctx, user); must(t, err); return n }
	total := func() int64 { o, err := st.FindOrder(ctx, order); must(t, err); return o.TotalCost }
	for _, tc := range []struct {
		name   string
		marker string // the id whose key the change's request names
		change func() (int64, error)
		want   int64
		stored func() int64
	}{
		{"add stock", item, func() (int64, error) { return st.AddStock(ctx, item, 5) }, 105, stock},
		{"subtract stock", item, func() (int64, error) { return st.SubtractStock(ctx, item, 2) }, 103, stock},
		{"add funds", user, func() (int64, error) { return st.AddFunds(ctx, user, 5) }, 105, credit},
		{"pay", user, func() (int64, error) { return st.Pay(ctx, user, 2) }, 103, credit},
		{"add item", order, func() (int64, error) { return st.AddItem(ctx, order, item, 2) }, 7 + 2*7, total},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := proxy.dropped.Load()
			proxy.arm(tc.marker)
			got, err := tc.change()
			if proxy.dropped.Load() != before+1 {
				t.Fatalf("no reply was lost: the proxy did not see the change's request")
			}
			if err != nil || got != tc.want {
				t.Errorf("%s answered %d, %v; want %d", tc.name, got, err, tc.want)
			}
			if n := tc.stored(); n != tc.want {
				t.Errorf("%s stored %d, want %d: applied more than once", tc.name, n, tc.want)
			}
		})
	}
	o, err := st.FindOrder(ctx, order)
	if err != nil || len(o.Lines) != 2 {
		t.Errorf("order lines %v, %v; want 2 (one per add item)", o.Lines, err)
	}
}

func second[T any](_ T, err error) error { return err }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
