package checkouttest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// WorkloadConfig sizes a workload. The zero value is valid.
type WorkloadConfig struct {
	// Items and Users created. Default 24 each.
	Items, Users int
	// OrdersPerUser built, each of one or two items, one or two units
	// each. Default 8.
	OrdersPerUser int
	// Stock and Credit each item and user starts with (recorded adds).
	// Default 8 and 12: low enough that stock and credit run short.
	Stock, Credit int64
	// Clients is the number of concurrent clients. Default 8.
	Clients int
	// CallTimeout bounds each call; a call without an answer by then is
	// Unknown. Default 10s.
	CallTimeout time.Duration
	// MaxOps stops each client after that many calls. Default 0: until
	// the run's context ends.
	MaxOps int
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c WorkloadConfig) WithDefaults() WorkloadConfig {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Items, 24)
	def(&c.Users, 24)
	def(&c.OrdersPerUser, 8)
	def(&c.Clients, 8)
	c.Stock = cmp.Or(c.Stock, 8)
	c.Credit = cmp.Or(c.Credit, 12)
	c.CallTimeout = cmp.Or(c.CallTimeout, 10*time.Second)
	return c
}

// Validate reports whether the configuration is usable.
func (c WorkloadConfig) Validate() error {
	if c.Items < 0 || c.Users < 0 || c.OrdersPerUser < 0 || c.Clients < 0 || c.Stock < 0 || c.Credit < 0 || c.CallTimeout < 0 || c.MaxOps < 0 {
		return errors.New("checkouttest: WorkloadConfig: negative field")
	}
	return nil
}

// Workload is a set of items, users and orders that concurrent clients
// drive through the contract at a base URL, recording every call.
type Workload struct {
	cfg    WorkloadConfig
	base   string
	web    *http.Client
	rec    *Recorder
	items  []string
	users  []string
	orders []*Order

	mu      sync.Mutex
	unknown map[string]bool // orders whose last checkout had no answer
}

// NewWorkload creates the items, users and orders at base (unrecorded),
// then records the adds of their starting stock and credit.
func NewWorkload(ctx context.Context, base string, cfg WorkloadConfig) (*Workload, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Workload{cfg: cfg, base: base, rec: NewRecorder(), unknown: map[string]bool{},
		web: &http.Client{Timeout: cfg.CallTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	c := w.client(0)
	prices := map[string]int64{}
	for i := range cfg.Items {
		var b struct {
			ItemID string `json:"item_id"`
		}
		price := int64(1 + i%3)
		if err := c.setup(ctx, http.MethodPost, "/stock/item/create/"+n(price), &b); err != nil {
			return nil, err
		}
		w.items = append(w.items, b.ItemID)
		prices[b.ItemID] = price
	}
	for range cfg.Users {
		var b struct {
			UserID string `json:"user_id"`
		}
		if err := c.setup(ctx, http.MethodPost, "/payment/create_user", &b); err != nil {
			return nil, err
		}
		w.users = append(w.users, b.UserID)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, u := range w.users {
		for range cfg.OrdersPerUser {
			o, err := w.order(ctx, c, u, rnd)
			if err != nil {
				return nil, err
			}
			w.orders = append(w.orders, o)
		}
	}
	for _, it := range w.items {
		c.AddStock(ctx, it, cfg.Stock)
	}
	for _, u := range w.users {
		c.AddFunds(ctx, u, cfg.Credit)
	}
	return w, nil
}

// order builds an order of user u of one or two items and reads it back.
func (w *Workload) order(ctx context.Context, c *Client, u string, rnd *rand.Rand) (*Order, error) {
	var b struct {
		OrderID string `json:"order_id"`
	}
	if err := c.setup(ctx, http.MethodPost, "/orders/create/"+u, &b); err != nil {
		return nil, err
	}
	for range 1 + rnd.IntN(2) {
		item, qty := w.items[rnd.IntN(len(w.items))], 1+rnd.IntN(2)
		// Not retried: adding twice would change the order. The order is
		// read back below.
		if status, code := c.call(ctx, http.MethodPost, "/orders/addItem/"+b.OrderID+"/"+item+"/"+strconv.Itoa(qty), nil); status != http.StatusOK {
			return nil, fmt.Errorf("checkouttest: add an item to order %s: %d %s", b.OrderID, status, code)
		}
	}
	var found struct {
		Items     [][2]any `json:"items"`
		TotalCost int64    `json:"total_cost"`
	}
	if err := c.setup(ctx, http.MethodGet, "/orders/find/"+b.OrderID, &found); err != nil {
		return nil, err
	}
	o := &Order{ID: b.OrderID, User: u, Items: map[string]int64{}, Total: found.TotalCost}
	for _, l := range found.Items {
		id, _ := l[0].(string)
		qty, _ := l[1].(float64)
		o.Items[id] += int64(qty)
	}
	return o, nil
}

// client returns a recording client.
func (w *Workload) client(id int) *Client {
	return &Client{Base: w.base, HTTP: w.web, Rec: w.rec, ID: id}
}

// Recorder returns the recorder of every call of the workload.
func (w *Workload) Recorder() *Recorder { return w.rec }

// Run runs the clients until ctx ends (or each made MaxOps calls). Each
// client calls at random: stock and credit changes and reads on any item
// and user, checkouts and reads of its own orders (client i owns the
// orders i, i+Clients, …: one order is checked out by one client at a
// time).
func (w *Workload) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range w.cfg.Clients {
		wg.Go(func() { w.runClient(ctx, i) })
	}
	wg.Wait()
}

func (w *Workload) runClient(ctx context.Context, id int) {
	rnd := rand.New(rand.NewPCG(uint64(id), 7))
	var mine []*Order
	for i := id; i < len(w.orders); i += w.cfg.Clients {
		mine = append(mine, w.orders[i])
	}
	c := w.client(id)
	paid := map[string]bool{}
	var out Output
	for k := 0; ctx.Err() == nil && (w.cfg.MaxOps == 0 || k < w.cfg.MaxOps); k++ {
		if out.Outcome == Unknown || out.Outcome == NotSent {
			// A client's pause after a call without an answer, so an
			// outage does not fill the history with such calls.
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		item, user := w.items[rnd.IntN(len(w.items))], w.users[rnd.IntN(len(w.users))]
		switch r := rnd.IntN(100); {
		case r < 12:
			out = c.AddStock(ctx, item, 1+rnd.Int64N(3))
		case r < 22:
			out = c.SubtractStock(ctx, item, 1+rnd.Int64N(2))
		case r < 36:
			out = c.FindStock(ctx, item)
		case r < 46:
			out = c.AddFunds(ctx, user, 1+rnd.Int64N(4))
		case r < 56:
			out = c.Pay(ctx, user, 1+rnd.Int64N(3))
		case r < 70:
			out = c.FindUser(ctx, user)
		case len(mine) == 0:
			out = Output{}
		case r < 88:
			// Mostly orders this client has not seen paid: checking a
			// paid order out again is a read.
			o := mine[rnd.IntN(len(mine))]
			for try := 0; try < 3 && paid[o.ID]; try++ {
				o = mine[rnd.IntN(len(mine))]
			}
			out = w.checkout(ctx, c, o)
			if out.Outcome == OK {
				paid[o.ID] = true
			}
		default:
			out = c.FindOrder(ctx, mine[rnd.IntN(len(mine))])
		}
	}
}

func (w *Workload) checkout(ctx context.Context, c *Client, o *Order) Output {
	out := c.Checkout(ctx, o)
	if out.Outcome != NotSent {
		w.mu.Lock()
		w.unknown[o.ID] = out.Outcome == Unknown
		w.mu.Unlock()
	}
	return out
}

// Settle runs after the faults: it checks out again every order whose
// last checkout had no answer, until one answers, then reads every item,
// user and order once with an answer, all recorded; so a change
// acknowledged and later lost shows in the history. It gives up after
// limit and returns an error naming what stayed without an answer.
func (w *Workload) Settle(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	c := w.client(w.cfg.Clients)
	retry := func(what string, call func() Output) error {
		for {
			if o := call().Outcome; o != Unknown && o != NotSent {
				return nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("checkouttest: %s: no answer within %s", what, limit)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond): // a client's retry pause
			}
		}
	}
	for _, o := range w.orders {
		w.mu.Lock()
		open := w.unknown[o.ID]
		w.mu.Unlock()
		if open {
			if err := retry("checkout of "+o.ID, func() Output { return w.checkout(ctx, c, o) }); err != nil {
				return err
			}
		}
	}
	for _, it := range w.items {
		if err := retry("stock of "+it, func() Output { return c.FindStock(ctx, it) }); err != nil {
			return err
		}
	}
	for _, u := range w.users {
		if err := retry("credit of "+u, func() Output { return c.FindUser(ctx, u) }); err != nil {
			return err
		}
	}
	for _, o := range w.orders {
		if err := retry("order "+o.ID, func() Output { return c.FindOrder(ctx, o) }); err != nil {
			return err
		}
	}
	return nil
}
