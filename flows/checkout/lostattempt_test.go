package checkout_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/testenv"
	"github.com/dropstream/dropstream/stream"
)

// lostAttempt returns the commands attempt 1 of s's order would have had
// on a primary whose writes a failover lost: same number, another nonce.
func lostAttempt(t *testing.T, e *env, s shop) []checkout.Command {
	t.Helper()
	o, err := e.svc.Store().FindOrder(context.Background(), s.order)
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := e.svc.Commands(o, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cmds {
		cmds[i].Nonce = "lost"
	}
	return cmds
}

// deliver hands each command to its stage, as a stage that read it before
// the failover would once the new primary answers.
func deliver(t *testing.T, e *env, cmds ...checkout.Command) {
	t.Helper()
	for _, c := range cmds {
		name := checkout.StageStock
		if c.Payment() {
			name = checkout.StagePayment
		}
		var be *stream.BatchError
		if err := stage(t, e.svc, name).BatchHandler(context.Background(), []*stream.Message{commandMsg(t, c, 1)}); !isNilBatch(err, &be) {
			t.Fatalf("%s %s: %v", c.Type, c.Part, err)
		}
	}
}

// settled reports whether the lost attempt's command c failed or was
// rolled back.
func (e *env) settled(s shop, c checkout.Command) bool {
	keys := e.svc.Store().Keys()
	p, side := keys.Partition(s.item), "stock"
	if c.Payment() {
		p, side = keys.Partition(s.user), "payment"
	}
	ctx := context.Background()
	fwd := e.rdb.Get(ctx, keys.Ledger(p, side, s.order, 1, c.Nonce, false)).Val()
	return strings.HasPrefix(fwd, "fail:") || e.rdb.Get(ctx, keys.Ledger(p, side, s.order, 1, c.Nonce, true)).Val() == "ok"
}

func compensations(cmds []checkout.Command) []checkout.Command {
	out := make([]checkout.Command, len(cmds))
	for i, c := range cmds {
		out[i] = c.Compensation()
	}
	return out
}

// A failover without the replica wait can lose an attempt whose commands a
// stage still holds; the order's next attempt then has the same number.
// Those commands must never change the new attempt, and an effect they
// apply is undone.
func TestCheckout_commandsOfALostAttemptNeverTouchTheNextOne(t *testing.T) {
	const credit, qty, price = 10, 2, 3
	tests := []struct {
		name string
		// paidFirst: the new attempt has paid before the lost commands come.
		paidFirst bool
		// rollbacks: the lost attempt's compensations come, not its effects.
		rollbacks bool
	}{
		{"rollbacks after the next attempt paid", true, true},
		{"effects after the next attempt paid", true, false},
		{"effects before the order checks out again", false, false},
		{"rollbacks before the order checks out again", false, true},
	}
	for _, b := range contractBackends() {
		for _, tc := range tests {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				e := newEnv(t, b.url(t), envOptions{timeout: 20 * time.Second})
				s := newShop(t, e, credit, qty)
				lost := lostAttempt(t, e, s)
				if tc.paidFirst {
					e.must(t, 200, "POST", "/orders/checkout/"+s.order)
				}
				if tc.rollbacks {
					deliver(t, e, compensations(lost)...)
				} else {
					deliver(t, e, lost...)
					// Each effect applied goes back through the stages.
					testenv.WaitFor(t, 20*time.Second, func() bool {
						return e.settled(s, lost[0]) && e.settled(s, lost[1])
					}, "the lost attempt's effects failed or undone")
				}
				if !tc.paidFirst {
					s.expect(t, e, 10, credit, false)
					e.must(t, 200, "POST", "/orders/checkout/"+s.order)
				}
				s.expect(t, e, 10-qty, credit-qty*price, true)
				if got := e.sagaField(s.order, 1, "status"); got != checkout.StatusSucceeded {
					t.Errorf("attempt 1 status %q, want succeeded", got)
				}
				for _, part := range []string{"pay", lost[0].Part} {
					if c := e.sagaField(s.order, 1, "c:"+part); c != "" {
						t.Errorf("attempt 1 part %s shows compensation %q from the lost attempt", part, c)
					}
				}
				// The cluster is shared with other packages' tests: its drift
				// is theirs too.
				if d := e.drift(t); b.name != "redis-cluster" && d != (checkout.Drift{}) {
					t.Errorf("conservation drift %+v, want none", d)
				}
			})
		}
	}
}
