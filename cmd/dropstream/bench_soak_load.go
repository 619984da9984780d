package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dropstream/dropstream/internal/tick"
)

// soakLoad drives a light, steady load over a process's API: one request
// per tick, going round a cycle of the availability read, a whole checkout
// (an item with stock, a user with funds, an order of the item, its
// checkout) and, every tenth round, a log watcher created or deleted (at
// most soakWatchers live). Nothing it asks for reaches outside the machine.
type soakLoad struct {
	base   string
	every  time.Duration
	client *http.Client

	mu       sync.Mutex
	byStatus map[string]int // "200", "error", …
}

// soakWatchers is the most watchers the load keeps at once.
const soakWatchers = 5

func newSoakLoad(base string, rate float64) *soakLoad {
	return &soakLoad{base: base, every: time.Duration(float64(time.Second) / rate),
		client: &http.Client{Timeout: 30 * time.Second}, byStatus: map[string]int{}}
}

// soakStep is one request of the cycle: its method and path (with the ids
// it needs), and the JSON field of the answer it keeps.
type soakStep struct {
	method, path, body string
	keep               string
}

// checkoutSteps make one whole checkout through the contract; a path's
// {field} is the id an earlier step kept from that field of its answer.
var checkoutSteps = []soakStep{
	{method: "POST", path: "/stock/item/create/3", keep: "item_id"},
	{method: "POST", path: "/stock/add/{item_id}/2"},
	{method: "POST", path: "/payment/create_user", keep: "user_id"},
	{method: "POST", path: "/payment/add_funds/{user_id}/10"},
	{method: "POST", path: "/orders/create/{user_id}", keep: "order_id"},
	{method: "POST", path: "/orders/addItem/{order_id}/{item_id}"},
	{method: "POST", path: "/orders/checkout/{order_id}"},
}

// cycle is the requests of round n, given the ids kept so far.
func (l *soakLoad) cycle(n int, ids map[string]string, watchers []string) []soakStep {
	steps := append([]soakStep{{method: "GET", path: "/v1/availability?limit=20"}}, checkoutSteps...)
	if n%10 == 9 {
		if len(watchers) < soakWatchers {
			steps = append(steps, soakStep{method: "POST", path: "/v1/watchers", keep: "id",
				body: fmt.Sprintf(`{"name":"soak %d","provider":"simulator","channel":"log","party_sizes":[2]}`, n)})
		} else {
			steps = append(steps, soakStep{method: "DELETE", path: "/v1/watchers/" + watchers[0]})
		}
	}
	for i := range steps {
		steps[i].path = fillIDs(steps[i].path, ids)
	}
	return steps
}

// run sends the load until ctx ends.
func (l *soakLoad) run(ctx context.Context) {
	var watchers []string
	n, i, ids := 0, 0, map[string]string{}
	tick.EveryAfter(ctx, l.every, func() {
		steps := l.cycle(n, ids, watchers)
		s := steps[i]
		got, ok := l.do(ctx, s)
		switch {
		case s.keep == "id" && ok:
			watchers = append(watchers, got)
		case s.method == "DELETE":
			watchers = watchers[1:] // deleted, or gone: either way not kept
		case s.keep != "" && ok:
			ids[s.keep] = got
		}
		if i++; i == len(steps) { // the round's length does not change within it
			n, i, ids = n+1, 0, map[string]string{}
		}
	})
}

// do sends one step and counts its answer; it returns the kept field.
func (l *soakLoad) do(ctx context.Context, s soakStep) (string, bool) {
	status, body, err := callAPI(ctx, l.client, s.method, l.base+s.path, s.body)
	if status == 0 {
		if ctx.Err() == nil {
			l.count("error")
		}
		return "", false
	}
	l.count(fmt.Sprint(status))
	if err != nil || s.keep == "" || status/100 != 2 {
		return "", false
	}
	v, err := answerField(body, s.keep)
	return v, err == nil && v != ""
}

func (l *soakLoad) count(status string) {
	l.mu.Lock()
	l.byStatus[status]++
	l.mu.Unlock()
}

// summary is the answers so far by status, as "200:1234 400:5".
func (l *soakLoad) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l.byStatus)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, l.byStatus[k]))
	}
	if len(parts) == 0 {
		return "none yet"
	}
	return strings.Join(parts, " ")
}
