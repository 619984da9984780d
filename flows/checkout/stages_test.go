package checkout_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/stream"
)

// stage returns the named stage of svc.
func stage(t testing.TB, svc *checkout.Flow, name string) stream.Stage {
	t.Helper()
	for _, s := range svc.Stages() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no stage %s", name)
	return stream.Stage{}
}

func commandMsg(t *testing.T, c checkout.Command, attempt int) *stream.Message {
	t.Helper()
	body, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	m := stream.NewMessage(c.OrderID, checkout.TypeCommand, body)
	m.ID, m.Attempt = "1-1", attempt
	return m
}

func TestStages_effectsApplyOncePerLedgerKey(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			rdb, err := stream.Dial(ctx, b.url(t))
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			svc, err := checkout.NewWith(rdb, stream.NewPublisher(rdb, stream.Telemetry{}), checkout.Config{Partitions: partitions}, stream.Telemetry{Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			st := svc.Store()
			if err := st.BatchInitItems(ctx, 1, 10, 1); err != nil {
				t.Fatal(err)
			}
			if err := st.BatchInitUsers(ctx, 1, 10); err != nil {
				t.Fatal(err)
			}
			stock, pay := stage(t, svc, checkout.StageStock).BatchHandler, stage(t, svc, checkout.StagePayment).BatchHandler
			sub := checkout.Command{OrderID: "o1", TrNum: 1, Type: checkout.CmdSubtract, Part: "stock.x", Items: []checkout.Line{{ID: "0", Amount: 3}}}
			charge := checkout.Command{OrderID: "o1", TrNum: 1, Type: checkout.CmdPay, Part: "pay", UserID: "0", Amount: 4}
			late := checkout.Command{OrderID: "o2", TrNum: 1, Type: checkout.CmdSubtract, Part: "stock.x", Items: []checkout.Line{{ID: "0", Amount: 5}}}
			steps := []struct {
				name    string
				h       stream.BatchHandler
				cmd     checkout.Command
				stock   int64
				credit  int64
				outcome string
			}{
				{"subtract", stock, sub, 7, 10, "ok"},
				{"subtract redelivered", stock, sub, 7, 10, "ok"},
				{"pay", pay, charge, 7, 6, "ok"},
				{"pay redelivered", pay, charge, 7, 6, "ok"},
				{"cancel payment", pay, charge.Compensation(), 7, 10, "ok"},
				{"cancel payment redelivered", pay, charge.Compensation(), 7, 10, "ok"},
				{"add back", stock, sub.Compensation(), 10, 10, "ok"},
				{"compensation before its command", stock, late.Compensation(), 10, 10, "noop"},
				{"command after its compensation", stock, late, 10, 10, "cancelled"},
				{"attempt 2 is a new key", stock, checkout.Command{OrderID: "o1", TrNum: 2, Type: checkout.CmdSubtract, Part: "stock.x",
					Items: []checkout.Line{{ID: "0", Amount: 11}}}, 10, 10, "fail:insufficient stock for item 0"},
			}
			keys := st.Keys()
			for _, s := range steps {
				err := s.h(ctx, []*stream.Message{commandMsg(t, s.cmd, 1)})
				var be *stream.BatchError
				if !isNilBatch(err, &be) {
					t.Fatalf("%s: %v", s.name, err)
				}
				gotStock, _, _ := st.FindItem(ctx, "0")
				gotCredit, _ := st.FindUser(ctx, "0")
				if gotStock != s.stock || gotCredit != s.credit {
					t.Errorf("%s: stock %d credit %d, want %d %d", s.name, gotStock, gotCredit, s.stock, s.credit)
				}
				side, id := "stock", "0"
				if s.cmd.Payment() {
					side = "payment"
				}
				ledger := keys.Ledger(keys.Partition(id), side, s.cmd.OrderID, s.cmd.TrNum, s.cmd.Nonce, s.cmd.Rollback())
				if got := rdb.Get(ctx, ledger).Val(); got != s.outcome {
					t.Errorf("%s: ledger %q, want %q", s.name, got, s.outcome)
				}
			}
		})
	}
}

// isNilBatch reports whether err is nil or a BatchError of nil errors.
func isNilBatch(err error, be **stream.BatchError) bool {
	if err == nil {
		return true
	}
	e, ok := err.(*stream.BatchError)
	if !ok {
		return false
	}
	*be = e
	for _, x := range e.Errs {
		if x != nil {
			return false
		}
	}
	return true
}

// A flow whose stages would take a crashed copy's saga step over only after
// its checkout calls gave up is refused when it is built.
func TestNewWith_refusesStageTimingsLaterThanTheCheckoutTimeout(t *testing.T) {
	rdb, err := stream.Dial(t.Context(), miniredisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	_, err = checkout.NewWith(rdb, stream.NewPublisher(rdb, stream.Telemetry{}), checkout.Config{Partitions: 2,
		Timeout: 30 * time.Second, Stage: stream.RunnerConfig{ClaimIdle: 30 * time.Second}}, stream.Telemetry{Logger: quiet()})
	if !errors.Is(err, stream.ErrDeadlineConflict) || !strings.Contains(err.Error(), "checkout timeout") {
		t.Errorf("NewWith = %v, want a deadline conflict naming the checkout timeout", err)
	}
	if _, err := checkout.NewWith(rdb, stream.NewPublisher(rdb, stream.Telemetry{}), checkout.Config{Partitions: 2,
		Timeout: 30 * time.Second}, stream.Telemetry{Logger: quiet()}); err != nil {
		t.Errorf("NewWith with derived stage timings = %v, want nil", err)
	}
}
