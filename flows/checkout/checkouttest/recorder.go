package checkouttest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is a call of the contract.
type Kind string

// The recorded calls.
const (
	AddStock      Kind = "stock/add"
	SubtractStock Kind = "stock/subtract"
	FindStock     Kind = "stock/find"
	AddFunds      Kind = "payment/add_funds"
	Pay           Kind = "payment/pay"
	FindUser      Kind = "payment/find_user"
	Checkout      Kind = "orders/checkout"
	FindOrder     Kind = "orders/find"
)

// Order is an order as its client built it: its user, the quantity of
// each item and the total its checkout pays.
type Order struct {
	ID    string
	User  string
	Items map[string]int64
	Total int64
}

// Input is a call: its kind, the item, user or order it names, and its
// amount (stock or credit; none for reads and checkouts).
type Input struct {
	Kind   Kind
	Key    string
	Amount int64
	Order  *Order // the order of a checkout or a find of an order
}

// Outcome is how a call ended.
type Outcome int

const (
	// OK is a 200.
	OK Outcome = iota
	// Refused is the contract's 400 for a change it did not make: stock or
	// credit short ("insufficient"), a checkout that failed and was
	// compensated ("checkout_failed").
	Refused
	// Rejected is any other 4xx: an id not found, input refused. The
	// workload only names ids it created, so a model never allows it.
	Rejected
	// Unknown is a call without an answer: a timeout, a reset or refused
	// connection, a 5xx (503 while Redis is away, 500
	// "checkout_pending"). It may have taken effect, or not.
	Unknown
	// NotSent is a call whose connection was refused: it never reached
	// the server, so it changed nothing and the checker leaves it out.
	NotSent
)

// Output is a call's answer.
type Output struct {
	Outcome     Outcome
	Status      int    // the HTTP status, 0 without one
	Code        string // the error code of a 4xx or 5xx
	Value       int64  // the stock or credit a change or read answered
	Paid        bool   // a find of an order: whether it is paid
	AlreadyPaid bool   // a checkout answered 200: paid before this call
}

func (o Output) String() string {
	switch o.Outcome {
	case OK:
		switch {
		case o.AlreadyPaid:
			return "200 already paid"
		case o.Paid:
			return "200 paid"
		}
		return fmt.Sprintf("200 %d", o.Value)
	case Refused:
		return "400 " + o.Code
	case Rejected:
		return fmt.Sprintf("%d %s", o.Status, o.Code)
	}
	if o.Outcome == NotSent {
		return "not sent (" + o.Code + ")"
	}
	if o.Status != 0 {
		return fmt.Sprintf("unknown (%d %s)", o.Status, o.Code)
	}
	return "unknown (" + o.Code + ")"
}

// Op is one recorded call: who made it, what it was, what it answered,
// and when it was invoked and answered, from the recorder's start.
type Op struct {
	Client int
	Input  Input
	Output Output
	Call   time.Duration
	Return time.Duration // of an Unknown call: when the client stopped waiting
}

// History is the calls of a run, in the order they were invoked.
type History []Op

// Recorder records the calls of concurrent clients. Its methods are safe
// for concurrent use.
type Recorder struct {
	start    time.Time
	answered atomic.Int64
	mu       sync.Mutex
	ops      []Op
}

// NewRecorder returns a recorder whose clock starts now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Begin records that client invokes in, and returns the function that
// records its answer.
func (r *Recorder) Begin(client int, in Input) func(Output) {
	r.mu.Lock()
	i := len(r.ops)
	r.ops = append(r.ops, Op{Client: client, Input: in, Call: time.Since(r.start)})
	r.mu.Unlock()
	return func(out Output) {
		now := time.Since(r.start)
		if out.Outcome == OK || out.Outcome == Refused {
			r.answered.Add(1)
		}
		r.mu.Lock()
		r.ops[i].Output, r.ops[i].Return = out, now
		r.mu.Unlock()
	}
}

// Answered returns the number of calls answered 200 or refused so far:
// the progress of a run.
func (r *Recorder) Answered() int64 { return r.answered.Load() }

// History returns a copy of the calls recorded so far. A call whose
// answer is not recorded yet is Unknown.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := make(History, len(r.ops))
	copy(h, r.ops)
	for i := range h {
		if h[i].Return == 0 {
			h[i].Output = Output{Outcome: Unknown, Code: "no answer recorded"}
		}
	}
	return h
}

// Unknown returns the number of calls without an answer.
func (h History) Unknown() int {
	n := 0
	for _, op := range h {
		if op.Output.Outcome == Unknown {
			n++
		}
	}
	return n
}

// operations expands the history into the per-key operations the model
// checks. An Unknown call returns at the end of the history; an Unknown
// read is dropped.
func (h History) operations() []porcupine.Operation {
	var end int64
	for _, op := range h {
		end = max(end, int64(op.Return), int64(op.Call))
	}
	end++
	var ops []porcupine.Operation
	add := func(c int, s step, call, ret int64, out Output) {
		ops = append(ops, porcupine.Operation{ClientId: c, Input: s, Call: call, Output: out, Return: ret})
	}
	for i, op := range h {
		out, call, ret := op.Output, int64(op.Call), int64(op.Return)
		unknown := out.Outcome == Unknown
		if unknown {
			ret = end
		}
		in := op.Input
		if out.Outcome == NotSent {
			continue
		}
		switch in.Kind {
		case AddStock, AddFunds:
			add(op.Client, step{Key: keyOf(in), Act: actAdd, N: in.Amount}, call, ret, out)
		case SubtractStock, Pay:
			add(op.Client, step{Key: keyOf(in), Act: actSub, N: in.Amount}, call, ret, out)
		case FindStock, FindUser:
			if !unknown {
				add(op.Client, step{Key: keyOf(in), Act: actFind}, call, ret, out)
			}
		case FindOrder:
			if !unknown {
				add(op.Client, step{Key: "order:" + in.Order.ID, Act: actFindPaid, Order: in.Order.ID}, call, ret, out)
			}
		case Checkout:
			o := in.Order
			parts := []step{{Key: "order:" + o.ID}, {Key: "user:" + o.User, N: o.Total}}
			for item, n := range o.Items {
				parts = append(parts, step{Key: "item:" + item, N: n})
			}
			for _, p := range parts {
				p.Order, p.Call = o.ID, i
				switch {
				case out.Outcome == OK && out.AlreadyPaid:
					p.Act = actPaid
					add(op.Client, p, call, ret, out)
				case out.Outcome == OK:
					p.Act = actTake
					add(op.Client, p, call, ret, out)
				case out.Outcome == Rejected:
					p.Act = actTake // no state allows it
					add(op.Client, p, call, ret, out)
				default:
					p.Act = actHold
					add(op.Client, p, call, ret, out)
					p.Act = actRelease
					if unknown {
						p.Act = actSettle
					}
					add(op.Client, p, call, ret, out)
				}
			}
		}
	}
	return ops
}

func keyOf(in Input) string {
	switch in.Kind {
	case AddStock, SubtractStock, FindStock:
		return "item:" + in.Key
	}
	return "user:" + in.Key
}

// Summary counts the calls by kind and answer, e.g. "orders/checkout:
// 200 paid 40, 200 already paid 12, 400 checkout_failed 30, unknown 3".
func (h History) Summary() string {
	counts := map[Kind]map[string]int{}
	for _, op := range h {
		k := op.Output.String()
		switch op.Output.Outcome {
		case OK:
			if op.Input.Kind != Checkout {
				k = "200"
			}
		case Unknown:
			k = "unknown"
		case NotSent:
			k = "not sent"
		}
		if counts[op.Input.Kind] == nil {
			counts[op.Input.Kind] = map[string]int{}
		}
		counts[op.Input.Kind][k]++
	}
	var lines []string
	for _, kind := range []Kind{AddStock, SubtractStock, FindStock, AddFunds, Pay, FindUser, Checkout, FindOrder} {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(counts[kind])) {
			parts = append(parts, fmt.Sprintf("%s %d", k, counts[kind][k]))
		}
		if len(parts) > 0 {
			lines = append(lines, string(kind)+": "+strings.Join(parts, ", "))
		}
	}
	return strings.Join(lines, "; ")
}
