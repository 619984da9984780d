package checkout

import (
	"context"
	"fmt"
	"strconv"

	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/stream"
)

// call is one command's part of a batched effect call in partition p.
type call struct {
	keys []string
	args []any
	p    int
}

// stockEffect builds a stock command's effect call (one partition).
func (s *Flow) stockEffect(c Command) (call, error) {
	if len(c.Items) == 0 || len(c.Items) > MaxLines {
		return call{}, stream.Permanentf("checkout: stock command with %d items", len(c.Items))
	}
	p := s.keys.Partition(c.Items[0].ID)
	keys := []string{s.keys.Ledger(p, "stock", c.OrderID, c.TrNum, c.Nonce, false), s.keys.Ledger(p, "stock", c.OrderID, c.TrNum, c.Nonce, true)}
	args := []any{flag(c.Rollback()), len(c.Items)}
	for _, l := range c.Items {
		if !ValidID(l.ID) || s.keys.Partition(l.ID) != p || l.Amount < 1 || l.Amount > MaxAmount {
			return call{}, stream.Permanentf("checkout: stock command item %q amount %d not valid in partition %d", l.ID, l.Amount, p)
		}
		keys = append(keys, s.keys.Item(l.ID))
		args = append(args, l.ID, strconv.FormatInt(l.Amount, 10))
	}
	return call{keys, args, p}, nil
}

// paymentEffect builds the effect script part of a payment command.
func (s *Flow) paymentEffect(c Command) (call, error) {
	if !ValidID(c.UserID) || c.Amount < 0 || c.Amount > MaxAmount {
		return call{}, stream.Permanentf("checkout: payment command user %q amount %d not valid", c.UserID, c.Amount)
	}
	p := s.keys.Partition(c.UserID)
	keys := []string{s.keys.Ledger(p, "payment", c.OrderID, c.TrNum, c.Nonce, false), s.keys.Ledger(p, "payment", c.OrderID, c.TrNum, c.Nonce, true),
		s.keys.User(c.UserID)}
	args := []any{flag(c.Rollback()), 1, c.UserID, strconv.FormatInt(c.Amount, 10)}
	return call{keys, args, p}, nil
}

// effectHeader is the effect script's leading ARGV for a side ("stock" or
// "payment"): ledger ttl, the field changed and the noun of its hashes.
func (s *Flow) effectHeader(side string) []any {
	if side == "payment" {
		return []any{s.cfg.StateTTL.Milliseconds(), "credit", "user"}
	}
	return []any{s.cfg.StateTTL.Milliseconds(), "stock", "item"}
}

// byPartition groups the indexes 0..n-1 by partition, partitions in the
// order first seen.
func byPartition(n int, partition func(int) int) (order []int, members map[int][]int) {
	members = map[int][]int{}
	for i := range n {
		p := partition(i)
		if _, ok := members[p]; !ok {
			order = append(order, p)
		}
		members[p] = append(members[p], i)
	}
	return order, members
}

// applyEffects runs effectScript once per partition in one pipeline and
// returns each command's result or error.
func (s *Flow) applyEffects(ctx context.Context, header []any, parts []call) ([]string, []error) {
	results := make([]string, len(parts))
	errs := make([]error, len(parts))
	order, byPart := byPartition(len(parts), func(i int) int { return parts[i].p })
	calls := make([]script.Call, len(order))
	for j, p := range order {
		cl := script.Call{Args: append([]any(nil), header...)}
		for _, i := range byPart[p] {
			cl.Keys = append(cl.Keys, parts[i].keys...)
			cl.Args = append(cl.Args, parts[i].args...)
		}
		calls[j] = cl
	}
	// Distinct partitions: a NOSCRIPT retry's reordering is harmless.
	replies, _ := effectScript.RunAll(ctx, s.rdb, calls)
	for j, reply := range replies {
		members := byPart[order[j]]
		res, err := reply.StringSlice()
		if err == nil && len(res) != len(members) {
			err = fmt.Errorf("effect script replied %d results for %d commands", len(res), len(members))
		}
		for k, i := range members {
			if err != nil {
				errs[i] = err
				continue
			}
			results[i] = res[k]
		}
	}
	return results, errs
}

// outcomeRec is one outcome to record in its attempt's saga.
type outcomeRec struct {
	orderID  string
	tr       int64
	nonce    string
	part     string
	rollback bool
	result   string
}

// recordOutcomes runs outcomeScript per partition in one pipeline and
// returns each reply or error.
func (s *Flow) recordOutcomes(ctx context.Context, recs []outcomeRec, nowMs int64) ([][]string, []error) {
	out := make([][]string, len(recs))
	errs := make([]error, len(recs))
	order, byPart := byPartition(len(recs), func(i int) int { return s.keys.Partition(recs[i].orderID) })
	calls := make([]script.Call, len(order))
	for j, p := range order {
		cl := script.Call{Keys: []string{s.topics.Sagas.Stream(p), s.keys.Open(p)},
			Args: []any{strconv.FormatInt(nowMs, 10), s.cfg.StateTTL.Milliseconds(), DoneChannel}}
		for _, i := range byPart[p] {
			r := recs[i]
			cl.Keys = append(cl.Keys, s.keys.Order(r.orderID), s.keys.Saga(r.orderID, r.tr))
			cl.Args = append(cl.Args, r.orderID, strconv.FormatInt(r.tr, 10), r.nonce, r.part, flag(r.rollback), r.result)
		}
		calls[j] = cl
	}
	replies, _ := outcomeScript.RunAll(ctx, s.rdb, calls) // one call per partition: see applyEffects
	for j, reply := range replies {
		members := byPart[order[j]]
		res, err := reply.Slice()
		if err == nil && len(res) != len(members) {
			err = fmt.Errorf("outcome script replied %d results for %d outcomes", len(res), len(members))
		}
		for k, i := range members {
			if err != nil {
				errs[i] = err
				continue
			}
			items, _ := res[k].([]any)
			ss := make([]string, len(items))
			for n, x := range items {
				ss[n], _ = x.(string)
			}
			if len(ss) == 0 {
				errs[i] = fmt.Errorf("outcome script replied %v", res[k])
			}
			out[i] = ss
		}
	}
	return out, errs
}
