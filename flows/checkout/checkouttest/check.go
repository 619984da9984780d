package checkouttest

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// CheckTimeout bounds the checker's search; a history it cannot decide
// within it is reported as undecided, never as linearizable.
const CheckTimeout = 5 * time.Minute

// Result is what the checker found in a history.
type Result struct {
	Operations int           // calls recorded
	Unknown    int           // calls without an answer
	Keys       int           // items, users and orders checked, each alone
	Anomalies  []Anomaly     // the keys whose history no legal order explains
	Undecided  bool          // the search ran out of time: nothing is proven
	Elapsed    time.Duration // the checker's time
	// Visualization is the file of porcupine's visualization of the
	// history, written by Check when it found an anomaly.
	Visualization string
}

// Anomaly is a key whose operations no legal order explains.
type Anomaly struct {
	Key string
	Ops int // the key's operations
	// Linearized is the length of the longest legal order the checker
	// found, State the state it leaves, Last its last operations and
	// Stuck the first operations (by invocation) it could not add.
	Linearized  int
	State       string
	Last, Stuck []string
}

// shown bounds the operations an anomaly lists on each side.
const shown = 12

func (a Anomaly) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d operations; the longest legal order found takes %d of them, ending in state %s with:\n",
		a.Key, a.Ops, a.Linearized, a.State)
	for _, l := range a.Last {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	b.WriteString("  and none of the operations left fits next; the first of them:\n")
	for _, o := range a.Stuck {
		fmt.Fprintf(&b, "    %s\n", o)
	}
	return b.String()
}

// Linearizable reports whether the checker proved the history legal.
func (r Result) Linearizable() bool { return len(r.Anomalies) == 0 && !r.Undecided }

// String is the run's figure: the operations, the anomalies and the
// checker's time.
func (r Result) String() string {
	s := fmt.Sprintf("%d operations (%d without an answer) on %d keys: %d anomalies, checked in %s",
		r.Operations, r.Unknown, r.Keys, len(r.Anomalies), r.Elapsed.Round(time.Millisecond))
	if r.Undecided {
		s += " (undecided: the checker ran out of time)"
	}
	return s
}

// CheckHistory checks h and returns what it found, with porcupine's
// information on the linearizations it tried.
func CheckHistory(h History) (Result, porcupine.LinearizationInfo) {
	start := time.Now()
	ops := h.operations()
	parts := model.Partition(ops)
	res := Result{Operations: len(h), Unknown: h.Unknown(), Keys: len(parts)}
	verdict, info := porcupine.CheckOperationsVerbose(model, ops, CheckTimeout)
	res.Elapsed = time.Since(start)
	res.Undecided = verdict == porcupine.Unknown
	if verdict != porcupine.Illegal {
		return res, info
	}
	// Name the keys that fail, each with its longest legal prefix.
	for i, lins := range info.PartialLinearizations() {
		part := parts[i]
		longest := []int{}
		for _, l := range lins {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(part) {
			continue
		}
		a := Anomaly{Key: part[0].Input.(step).Key, Ops: len(part), Linearized: len(longest)}
		st := model.Init()
		in := make([]bool, len(part))
		for k, j := range longest {
			op := part[j]
			in[j] = true
			_, st = model.Step(st, op.Input, op.Output)
			if k >= len(longest)-shown {
				a.Last = append(a.Last, describeOp(op))
			}
		}
		a.State = model.DescribeState(st)
		var left []porcupine.Operation
		for j, op := range part {
			if !in[j] {
				left = append(left, op)
			}
		}
		sort.SliceStable(left, func(x, y int) bool { return left[x].Call < left[y].Call })
		for _, op := range left[:min(len(left), shown)] {
			a.Stuck = append(a.Stuck, describeOp(op))
		}
		res.Anomalies = append(res.Anomalies, a)
	}
	return res, info
}

func describeOp(op porcupine.Operation) string {
	ret := "end"
	if op.Output.(Output).Outcome != Unknown {
		ret = time.Duration(op.Return).Round(time.Microsecond).String()
	}
	return fmt.Sprintf("[%s, %s] client %d: %s", time.Duration(op.Call).Round(time.Microsecond), ret, op.ClientId,
		model.DescribeOperation(op.Input, op.Output))
}

// Check checks h, logs the figure (and each anomaly), and when it finds an
// anomaly writes porcupine's visualization of the history into the test's
// artifact directory (go test -artifacts keeps it) and logs its path. It
// does not fail the test: the caller states what it expects.
func Check(t testing.TB, h History) Result {
	t.Helper()
	res, info := CheckHistory(h)
	if len(res.Anomalies) > 0 {
		path := filepath.Join(t.ArtifactDir(), "history.html")
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Errorf("checkouttest: visualization: %v", err)
		} else {
			res.Visualization = path
		}
	}
	t.Logf("history: %s", res)
	t.Logf("calls: %s", h.Summary())
	for i, a := range res.Anomalies {
		if i == 10 {
			t.Logf("… %d more anomalies", len(res.Anomalies)-i)
			break
		}
		t.Logf("anomaly %s", a)
	}
	if res.Visualization != "" {
		t.Logf("visualization of the history: %s", res.Visualization)
	}
	return res
}
