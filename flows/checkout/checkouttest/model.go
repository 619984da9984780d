// Package checkouttest checks histories of the checkout flow's public
// order/stock/payment HTTP contract for linearizability, as Jepsen checks
// databases: concurrent clients (Client) drive the contract and record each
// call's invocation and answer (Recorder); Check asks porcupine whether
// some order of the calls, each taking effect at one instant between its
// invocation and its answer, is legal for the models below.
//
// The history is split per key, and each key is checked alone:
//
//   - an item's stock: add, subtract (refused when short), find, and the
//     stock every checkout of an order holding the item takes;
//   - a user's credit: add funds, pay (refused when short), find, and the
//     total every checkout of the user's orders pays;
//   - an order: paid once, find.
//
// A checkout is a saga, not one atomic write: its stock and its payment
// are taken at different instants, and a failed attempt may hold stock or
// credit for a while before its compensation gives it back. So on each key
// a checkout answered 200 takes its amount once, at one instant of the
// call, and only if the order was not paid; a checkout answered 400 may
// hold its amount and gives it back before its answer, leaving the order
// unpaid; a call already paid takes nothing. "Together or neither" across
// keys follows from an order's answers being stated on every key it
// touches: once an order answered 200 (or 400), every key of the order
// must show it taken (or not taken).
//
// A call without an answer — a timeout, a reset connection, a 5xx such as
// 503 — has an unknown outcome, as Jepsen treats it, never a failure: it
// may take effect at any instant after its invocation, or never (its
// return is the end of the history). A checkout without an answer may
// hold its amount and later either keep it (the order is paid) or give it
// back. A read without an answer is dropped.
package checkouttest

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// act is what one operation does on one key.
type act int

const (
	actAdd      act = iota // add N; answer: the new value
	actSub                 // subtract N; answer: the new value, or refused when short
	actFind                // read; answer: the value
	actTake                // a checkout answered 200 that paid: take N once for the order
	actPaid                // a checkout answered 200, already paid: the order was taken
	actHold                // first half of a 400 or unknown checkout: hold N if the order is unpaid and N is there
	actRelease             // second half of a 400 checkout: give the hold back, the order unpaid
	actSettle              // second half of an unknown checkout: give the hold back, or keep it (the order paid)
	actFindPaid            // read an order; answer: whether it is paid
)

var actNames = [...]string{"add", "subtract", "find", "take", "paid", "hold", "release", "settle", "find-order"}

// step is the input of one operation on one key.
type step struct {
	Key   string // "item:<id>", "user:<id>" or "order:<id>"
	Act   act
	N     int64
	Order string // the order of a checkout's steps
	Call  int    // the recorded call a checkout's steps come from
}

// paid levels of an order in a key's state.
const (
	unpaid          = 0
	paidByUnknown   = 1 // a checkout without an answer kept its hold
	paidByConfirmed = 2 // a checkout answered 200 that paid
)

// state is one key's state: its value (stock or credit), the level at
// which each order is paid on it, and the holds of checkouts whose
// attempt may still give them back (the amount held, or -1 for a hold
// that found the order paid or the value short and holds nothing).
type state struct {
	V      int64
	Orders map[string]int8
	Held   map[int]int64
}

// value returns s with the value v. States are never changed in place:
// each method returns a copy, sharing what it does not change.
func (s state) value(v int64) state { s.V = v; return s }

// paid returns s with order paid at level.
func (s state) paid(order string, level int8) state {
	s.Orders = maps.Clone(s.Orders)
	if s.Orders == nil {
		s.Orders = map[string]int8{}
	}
	s.Orders[order] = level
	return s
}

// hold returns s with call holding amount (-1: nothing).
func (s state) hold(call int, amount int64) state {
	s.Held = maps.Clone(s.Held)
	if s.Held == nil {
		s.Held = map[int]int64{}
	}
	s.Held[call] = amount
	return s
}

// settled returns s without call's hold.
func (s state) settled(call int) state {
	s.Held = maps.Clone(s.Held)
	delete(s.Held, call)
	return s
}

func equal(a, b any) bool {
	x, y := a.(state), b.(state)
	return x.V == y.V && maps.Equal(x.Orders, y.Orders) && maps.Equal(x.Held, y.Held)
}

// next returns the states the key may reach from s by the step in with
// the answer out; none when the answer is impossible there.
func next(s state, in step, out Output) []any {
	if out.Outcome == Rejected {
		return nil // a 4xx the contract does not allow here: a lost key, say
	}
	known := out.Outcome != Unknown
	level := s.Orders[in.Order]
	switch in.Act {
	case actAdd:
		if known && out.Value != s.V+in.N {
			return nil
		}
		return []any{s.value(s.V + in.N)}
	case actSub:
		switch {
		case out.Outcome == Refused:
			if s.V >= in.N {
				return nil
			}
			return []any{s}
		case s.V < in.N:
			if known {
				return nil
			}
			return []any{s}
		case known && out.Value != s.V-in.N:
			return nil
		}
		return []any{s.value(s.V - in.N)}
	case actFind:
		if out.Value != s.V {
			return nil
		}
		return []any{s}
	case actFindPaid:
		if out.Paid != (level != unpaid) {
			return nil
		}
		return []any{s}
	case actTake:
		switch level {
		case unpaid:
			if s.V < in.N {
				return nil
			}
			return []any{s.value(s.V-in.N).paid(in.Order, paidByConfirmed)}
		case paidByUnknown:
			// The call joined the attempt an unanswered call began.
			return []any{s.paid(in.Order, paidByConfirmed)}
		}
		return nil // paid twice
	case actPaid:
		if level == unpaid {
			return nil
		}
		return []any{s}
	case actHold:
		if level == unpaid && s.V >= in.N {
			return []any{s.value(s.V-in.N).hold(in.Call, in.N)}
		}
		return []any{s.hold(in.Call, -1)}
	case actRelease, actSettle:
		held, ok := s.Held[in.Call]
		if !ok {
			return nil // the hold comes first
		}
		back := max(held, 0)
		var out []any
		if in.Act == actSettle || level == unpaid {
			out = append(out, s.value(s.V+back).settled(in.Call))
		}
		if in.Act == actSettle && held >= 0 && level == unpaid {
			out = append(out, s.paid(in.Order, paidByUnknown).settled(in.Call))
		}
		return out
	}
	return nil
}

func describeState(st any) string {
	s := st.(state)
	var b strings.Builder
	fmt.Fprintf(&b, "%d", s.V)
	var paid []string
	for o, l := range s.Orders {
		if l != unpaid {
			paid = append(paid, o)
		}
	}
	if len(paid) > 0 {
		sort.Strings(paid)
		fmt.Fprintf(&b, " paid %s", strings.Join(paid, ","))
	}
	if len(s.Held) > 0 {
		fmt.Fprintf(&b, " %d held", len(s.Held))
	}
	return b.String()
}

func describeStep(in, out any) string {
	s, o := in.(step), out.(Output)
	var b strings.Builder
	b.WriteString(actNames[s.Act])
	if s.N != 0 || s.Act == actAdd || s.Act == actSub {
		fmt.Fprintf(&b, "(%d)", s.N)
	}
	if s.Order != "" {
		fmt.Fprintf(&b, " order %s", s.Order)
	}
	b.WriteString(" → ")
	b.WriteString(o.String())
	return b.String()
}

// model is the per-key model, partitioned by key.
var model = (&porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(step).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, len(keys))
		for i, k := range keys {
			out[i] = byKey[k]
		}
		return out
	},
	Init: func() []any { return []any{state{}} },
	Step: func(st, in, out any) []any {
		return next(st.(state), in.(step), out.(Output))
	},
	Equal: equal,
	Hash: func(st any) uint64 {
		s := st.(state)
		return uint64(s.V)*31 + uint64(len(s.Orders))*7 + uint64(len(s.Held))
	},
	DescribeOperation: describeStep,
	DescribeState:     describeState,
}).ToModel()
