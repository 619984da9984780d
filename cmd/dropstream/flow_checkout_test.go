package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// TestRun_checkoutSweeperFinishesAnAttemptWhoseCommandsWereLost shows that
// `run` runs the checkout sweeper service with the flow's variables: an
// attempt whose commands never reached the stages (its checkout process
// gone, the entries trimmed) is driven to its end by the sweeper alone.
func TestRun_checkoutSweeperFinishesAnAttemptWhoseCommandsWereLost(t *testing.T) {
	clearEnv(t)
	const partitions = 4
	ctx := context.Background()
	url := testenv.RedisURL(t)
	rdb := testenv.Dial(t, url)
	tel := stream.Telemetry{}
	svc, err := checkout.NewWith(rdb, stream.NewPublisher(rdb, tel), checkout.Config{Partitions: partitions}, tel)
	if err != nil {
		t.Fatal(err)
	}
	st := svc.Store()
	if err := errors.Join(st.BatchInitItems(ctx, 1, 5, 3), st.BatchInitUsers(ctx, 1, 10)); err != nil {
		t.Fatal(err)
	}
	order, err := st.CreateOrder(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddItem(ctx, order, "0", 2); err != nil {
		t.Fatal(err)
	}
	// The attempt begins, its caller goes away, and its commands are lost.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := svc.Checkout(cctx, order)
		errc <- err
	}()
	testenv.WaitFor(t, 10*time.Second, func() bool { return rdb.Exists(ctx, st.Keys().Saga(order, 1)).Val() == 1 }, "attempt 1 begun")
	cancel()
	if err := <-errc; !errors.Is(err, checkout.ErrPending) {
		t.Fatalf("cancelled checkout = %v, want ErrPending", err)
	}
	for _, topic := range []stream.Topic{svc.Topics().Stock, svc.Topics().Payment} {
		for p := range topic.Partitions {
			if err := rdb.XTrimMaxLen(ctx, topic.Stream(p), 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Setenv("DROPSTREAM_CHECKOUT_SWEEP_INTERVAL", "100ms")
	t.Setenv("DROPSTREAM_CHECKOUT_SWEEP_AGE", "200ms")
	b := startDispatch(t, "run", "--redis-url", url, "--partitions", "4", "--api-addr", "", "--log-format", "text",
		"--stages", strings.Join([]string{checkout.ServiceSweeper, checkout.StageStock, checkout.StagePayment}, ","))
	b.waitFor(t, 20*time.Second, func() bool {
		o, err := st.FindOrder(ctx, order)
		return err == nil && o.Paid
	}, "the order paid")
	stock, _, err := st.FindItem(ctx, "0")
	if err != nil || stock != 3 {
		t.Errorf("stock %d, %v; want 3", stock, err)
	}
	if credit, err := st.FindUser(ctx, "0"); err != nil || credit != 4 {
		t.Errorf("credit %d, %v; want 4", credit, err)
	}
	if err := b.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(b.stderr.String(), "swept stale attempts") {
		t.Errorf("run did not log the sweep:\n%s", b.stderr)
	}
}

func TestRun_checkoutVariablesMustBePositiveDurations(t *testing.T) {
	cfg := Config{APIAddr: ":8080", Partitions: 8}
	for _, v := range checkout.Vars {
		for _, bad := range []string{"soon", "0s", "-1s"} {
			t.Run(v.Name+"="+bad, func(t *testing.T) {
				clearEnv(t)
				t.Setenv(v.Name, bad)
				_, err := readSettingsWith(cfg, nil, os.LookupEnv)
				if err == nil || !strings.Contains(err.Error(), v.Name) {
					t.Errorf("readSettings = %v, want an error naming %s", err, v.Name)
				}
			})
		}
	}
	clearEnv(t)
	t.Setenv("DROPSTREAM_CHECKOUT_TIMEOUT", "5s")
	t.Setenv("DROPSTREAM_CHECKOUT_ABANDON_AGE", "10m")
	s, err := readSettingsWith(cfg, nil, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	f, err := checkout.New(context.Background(), flow.Deps{Settings: s})
	if err != nil {
		t.Fatal(err)
	}
	co, def := f.Config(), checkout.Config{}.WithDefaults()
	if co.Timeout != 5*time.Second || co.AbandonAge != 10*time.Minute || co.SweepAge != def.SweepAge || co.SweepInterval != def.SweepInterval ||
		co.Partitions != 8 {
		t.Errorf("checkout config = %+v; want Timeout 5s, AbandonAge 10m, 8 partitions, the rest default", co)
	}
}
