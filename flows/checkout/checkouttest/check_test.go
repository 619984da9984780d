package checkouttest

import (
	"os"
	"strings"
	"testing"
	"time"
)

// at builds a recorded call from call to ret (in ms).
func at(client int, in Input, out Output, call, ret int) Op {
	return Op{Client: client, Input: in, Output: out, Call: time.Duration(call) * time.Millisecond, Return: time.Duration(ret) * time.Millisecond}
}

func add(item string, n int64) Input   { return Input{Kind: AddStock, Key: item, Amount: n} }
func sub(item string, n int64) Input   { return Input{Kind: SubtractStock, Key: item, Amount: n} }
func find(item string) Input           { return Input{Kind: FindStock, Key: item} }
func funds(user string, n int64) Input { return Input{Kind: AddFunds, Key: user, Amount: n} }
func findUser(user string) Input       { return Input{Kind: FindUser, Key: user} }
func checkout(o *Order) Input          { return Input{Kind: Checkout, Key: o.ID, Order: o} }
func findOrder(o *Order) Input         { return Input{Kind: FindOrder, Key: o.ID, Order: o} }
func val(v int64) Output               { return Output{Outcome: OK, Status: 200, Value: v} }

var (
	unknown  = Output{Outcome: Unknown, Code: "timeout"}
	short    = Output{Outcome: Refused, Status: 400, Code: "insufficient"}
	failed   = Output{Outcome: Refused, Status: 400, Code: "checkout_failed"}
	paid     = Output{Outcome: OK, Status: 200, Paid: true}
	already  = Output{Outcome: OK, Status: 200, Paid: true, AlreadyPaid: true}
	isPaid   = Output{Outcome: OK, Status: 200, Paid: true}
	notPaid  = Output{Outcome: OK, Status: 200}
	notFound = Output{Outcome: Rejected, Status: 400, Code: "not_found"}
)

func TestCheckHistory_decidesWhatTheModelsAllow(t *testing.T) {
	o := &Order{ID: "o1", User: "u1", Items: map[string]int64{"i1": 2}, Total: 4}
	start := []Op{at(0, add("i1", 5), val(5), 0, 1), at(0, funds("u1", 10), val(10), 0, 1)}
	for _, tc := range []struct {
		name  string
		ops   []Op
		legal bool
		key   string // the key of the anomaly
	}{
		{"a read concurrent with an add sees either value", []Op{
			at(0, add("i1", 2), val(7), 10, 20), at(1, find("i1"), val(5), 11, 12), at(2, find("i1"), val(7), 13, 14),
		}, true, ""},
		{"a read after an acknowledged add sees it", []Op{
			at(0, add("i1", 2), val(7), 10, 20), at(1, find("i1"), val(5), 21, 22),
		}, false, "item:i1"},
		{"an add without an answer may have happened", []Op{
			at(0, add("i1", 2), unknown, 10, 20), at(1, find("i1"), val(7), 30, 31),
		}, true, ""},
		{"an add without an answer may not have happened", []Op{
			at(0, add("i1", 2), unknown, 10, 20), at(1, find("i1"), val(5), 30, 31), at(1, find("i1"), val(5), 40, 41),
		}, true, ""},
		{"an add without an answer happens once", []Op{
			at(0, add("i1", 2), unknown, 10, 20), at(1, find("i1"), val(7), 30, 31), at(1, find("i1"), val(5), 40, 41),
		}, false, "item:i1"},
		{"a subtract is refused only when short", []Op{
			at(0, sub("i1", 3), short, 10, 20),
		}, false, "item:i1"},
		{"an acknowledged subtract that a restart erased", []Op{
			at(0, sub("i1", 3), val(2), 10, 20), at(1, find("i1"), val(5), 30, 31),
		}, false, "item:i1"},
		{"a checkout that paid takes stock and credit", []Op{
			at(0, checkout(o), paid, 10, 20), at(1, find("i1"), val(3), 30, 31), at(1, findUser("u1"), val(6), 32, 33),
			at(1, findOrder(o), isPaid, 34, 35),
		}, true, ""},
		{"a checkout that paid took no credit", []Op{
			at(0, checkout(o), paid, 10, 20), at(1, find("i1"), val(3), 30, 31), at(1, findUser("u1"), val(10), 32, 33),
		}, false, "user:u1"},
		{"an order paid twice", []Op{
			at(0, checkout(o), paid, 10, 20), at(0, checkout(o), paid, 30, 40),
		}, false, "item:i1"},
		{"a checkout again answers already paid", []Op{
			at(0, checkout(o), paid, 10, 20), at(0, checkout(o), already, 30, 40), at(1, find("i1"), val(3), 50, 51),
		}, true, ""},
		{"already paid with no checkout that paid", []Op{
			at(0, checkout(o), already, 30, 40),
		}, false, "item:i1"},
		{"a failed checkout's hold seen while it runs", []Op{
			at(0, checkout(o), failed, 10, 20), at(1, find("i1"), val(3), 11, 12), at(1, find("i1"), val(5), 21, 22),
			at(1, findOrder(o), notPaid, 23, 24),
		}, true, ""},
		{"a failed checkout that kept its stock", []Op{
			at(0, checkout(o), failed, 10, 20), at(1, find("i1"), val(3), 21, 22),
		}, false, "item:i1"},
		{"a checkout without an answer that paid, then already paid", []Op{
			at(0, checkout(o), unknown, 10, 20), at(1, find("i1"), val(3), 30, 31), at(0, checkout(o), already, 40, 50),
			at(1, findUser("u1"), val(6), 60, 61),
		}, true, ""},
		{"a checkout without an answer whose attempt a second call joins", []Op{
			at(0, checkout(o), unknown, 10, 20), at(1, find("i1"), val(3), 21, 22), at(0, checkout(o), paid, 30, 40),
			at(1, find("i1"), val(3), 50, 51), at(1, findUser("u1"), val(6), 52, 53),
		}, true, ""},
		{"a checkout without an answer compensated", []Op{
			at(0, checkout(o), unknown, 10, 20), at(1, find("i1"), val(3), 21, 22), at(1, find("i1"), val(5), 30, 31),
			at(0, checkout(o), failed, 40, 50),
		}, true, ""},
		{"paid, but its stock was never taken", []Op{
			at(0, checkout(o), unknown, 10, 20), at(1, findUser("u1"), val(6), 21, 22),
			at(0, checkout(o), already, 40, 50), at(1, find("i1"), val(5), 60, 61),
		}, false, "item:i1"},
		{"an item the contract lost", []Op{
			at(1, Input{Kind: FindStock, Key: "i1"}, notFound, 30, 31),
		}, false, "item:i1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := CheckHistory(append(append(History{}, start...), tc.ops...))
			if res.Undecided {
				t.Fatalf("undecided: %s", res)
			}
			if res.Linearizable() != tc.legal {
				t.Fatalf("linearizable = %v, want %v: %s %v", res.Linearizable(), tc.legal, res, res.Anomalies)
			}
			if !tc.legal {
				var keys []string
				for _, a := range res.Anomalies {
					keys = append(keys, a.Key)
				}
				if !strings.Contains(strings.Join(keys, " "), tc.key) {
					t.Errorf("anomalies on %v, want one on %s", keys, tc.key)
				}
			}
		})
	}
}

func TestCheck_writesTheVisualizationOfAnAnomaly(t *testing.T) {
	h := History{at(0, add("i1", 2), val(2), 0, 1), at(1, find("i1"), val(0), 5, 6)}
	res := Check(t, h)
	if len(res.Anomalies) != 1 || res.Anomalies[0].Key != "item:i1" {
		t.Fatalf("anomalies %v, want one on item:i1", res.Anomalies)
	}
	b, err := os.ReadFile(res.Visualization)
	if err != nil {
		t.Fatalf("visualization: %v", err)
	}
	if !strings.Contains(string(b), "find") {
		t.Errorf("the visualization does not describe the operations")
	}
	if s := res.Anomalies[0].String(); !strings.Contains(s, "find → 200 0") {
		t.Errorf("the anomaly does not name the read that fits nowhere:\n%s", s)
	}
}
