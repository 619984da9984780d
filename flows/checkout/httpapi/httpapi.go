// Package httpapi serves the checkout flow's order/stock/payment HTTP
// contract: paths under /stock, /payment and /orders, ids as strings,
// amounts as integers, JSON bodies. Success is 200; every failure the
// contract names (unknown id, short stock or credit, failed checkout,
// malformed input) is 400 with the error envelope {"error":{"code","message"}}.
// A Redis outage longer than a call's deadline (its wait, or
// Config.RetryFor), or a change the replicas did not confirm (Config.Wait),
// answers 503 "unavailable" with Retry-After; another Redis failure is 500
// ("checkout_pending" for a checkout whose outcome is unknown).
package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/stream"
)

// routes are the contract's handlers over the checkout flow.
type routes struct {
	f *checkout.Flow
}

// Response bodies.
type (
	itemID struct {
		ItemID string `json:"item_id"`
	}
	itemOut struct {
		Stock int64 `json:"stock"`
		Price int64 `json:"price"`
	}
	stockOut struct {
		ItemID string `json:"item_id"`
		Stock  int64  `json:"stock"`
	}
	userID struct {
		UserID string `json:"user_id"`
	}
	userOut struct {
		UserID string `json:"user_id"`
		Credit int64  `json:"credit"`
	}
	orderID struct {
		OrderID string `json:"order_id"`
	}
	orderOut struct {
		OrderID   string  `json:"order_id"`
		Paid      bool    `json:"paid"`
		Items     [][]any `json:"items"`
		UserID    string  `json:"user_id"`
		TotalCost int64   `json:"total_cost"`
	}
	addItemOut struct {
		OrderID   string `json:"order_id"`
		TotalCost int64  `json:"total_cost"`
	}
	checkoutOut struct {
		OrderID     string `json:"order_id"`
		Paid        bool   `json:"paid"`
		TrNum       int64  `json:"tr_num"`
		AlreadyPaid bool   `json:"already_paid"`
	}
	message struct {
		Msg string `json:"msg"`
	}
)

// Register adds the contract's routes over the checkout flow f to srv.
func Register(srv *api.Server, f *checkout.Flow) {
	r := routes{f: f}
	// The contract's routes are ClassContract, sized for its checkout
	// target; its batch inits are an operator's (admin).
	op := func(method, path, summary string, scope api.Scope, resp any, h fiber.Handler) {
		class := api.ClassContract
		if scope == api.ScopeAdmin {
			class = api.ClassAdmin
		}
		srv.Handle(api.Operation{Method: method, Path: path, Summary: summary, Tag: "checkout", Scope: scope, Class: class, Response: resp, Handler: h})
	}
	w, rd, adm := api.ScopeWrite, api.ScopeRead, api.ScopeAdmin
	op("POST", "/stock/item/create/:price", "Create an item with stock 0", w, itemID{}, r.createItem)
	op("GET", "/stock/find/:item_id", "An item's stock and price", rd, itemOut{}, r.findItem)
	op("POST", "/stock/add/:item_id/:amount", "Add stock", w, stockOut{}, change("item", f.Store().AddStock, stockOf))
	op("POST", "/stock/subtract/:item_id/:amount", "Take stock; 400 if it would go below 0", w, stockOut{}, change("item", f.Store().SubtractStock, stockOf))
	op("POST", "/stock/batch_init/:n/:starting_stock/:item_price", "Create or reset items \"0\"..\"n-1\"", adm, message{}, r.batchItems)
	op("POST", "/payment/create_user", "Create a user with credit 0", w, userID{}, r.createUser)
	op("GET", "/payment/find_user/:user_id", "A user's credit", rd, userOut{}, r.findUser)
	op("POST", "/payment/add_funds/:user_id/:amount", "Add credit", w, userOut{}, change("user", f.Store().AddFunds, creditOf))
	op("POST", "/payment/pay/:user_id/:amount", "Take credit; 400 if it would go below 0", w, userOut{}, change("user", f.Store().Pay, creditOf))
	op("POST", "/payment/batch_init/:n/:starting_money", "Create or reset users \"0\"..\"n-1\"", adm, message{}, r.batchUsers)
	op("POST", "/orders/create/:user_id", "Create an empty order of a user", w, orderID{}, r.createOrder)
	op("GET", "/orders/find/:order_id", "An order", rd, orderOut{}, r.findOrder)
	op("POST", "/orders/addItem/:order_id/:item_id", "Add one of an item to an order", w, addItemOut{}, r.addItem)
	op("POST", "/orders/addItem/:order_id/:item_id/:quantity", "Add quantity of an item to an order", w, addItemOut{}, r.addItem)
	op("POST", "/orders/checkout/:order_id", "Check an order out: 200 when paid and the stock taken, 400 once a failed attempt is compensated (also one given up when its wait expires)",
		w, checkoutOut{}, r.checkout)
	op("POST", "/orders/batch_init/:n/:n_items/:n_users/:item_price", "Create or reset orders \"0\"..\"n-1\" of two random items each", adm,
		message{}, r.batchOrders)
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/sagas/:order_id", Tag: "checkout", Scope: rd, Class: api.ClassRead,
		Summary: "The checkout timeline of an order, newest attempt first (at most 20): each attempt's steps (request, " +
			"outcome, compensation) from Redis while its saga is kept, its answer and counts from ClickHouse afterwards, with trace ids",
		Response: checkout.Timeline{}, Handler: r.timeline})
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/admin/sagas/:order_id/cancel", Tag: "checkout", Scope: adm, Class: api.ClassAdmin,
		Summary: "Cancel an order's running checkout attempt (one stuck on a participant): its silent parts are recorded " +
			"cancelled and every effect it applied is undone, exactly once; a repeated cancel answers the same. " +
			"404 without an attempt, 409 when the attempt succeeded (paid) or failed without a cancel",
		Response: checkout.Cancellation{}, Handler: r.cancel})
}

func (r routes) cancel(c *fiber.Ctx) error {
	id := c.Params("order_id")
	out, err := r.f.Cancel(c.UserContext(), id, api.Caller(c))
	return api.Reply(c, out, err, api.When(checkout.ErrNotFound, api.NotFound("order_not_found", "")), invalid,
		api.When(checkout.ErrConflict, api.Conflict("not_running", "")))
}

func (r routes) timeline(c *fiber.Ctx) error {
	if !api.SeesAll(c) && !checkout.Sees(api.View(c), c.Params("order_id")) {
		return api.NotFound("order_not_found", "no order "+c.Params("order_id"))
	}
	tl, err := r.f.Timeline(c.UserContext(), c.Params("order_id"))
	return api.Reply(c, tl, err, api.When(checkout.ErrNotFound, api.NotFound("order_not_found", "no order "+c.Params("order_id"))), invalid)
}

// invalid answers ErrInvalid as the contract's 400 "invalid".
var invalid = api.When(checkout.ErrInvalid, api.BadRequest("invalid", ""))

// contract answers the flow's errors as its 400s, ErrPending as 500 "checkout_pending".
var contract = []api.Case{
	api.When(checkout.ErrPending, api.NewError(http.StatusInternalServerError, "checkout_pending",
		"the checkout's outcome is not known yet; it will complete or be compensated: check the order out again for its outcome")),
	api.When(checkout.ErrNotFound, api.BadRequest("not_found", "")),
	api.When(checkout.ErrInsufficient, api.BadRequest("insufficient", "")),
	invalid,
	api.When(checkout.ErrConflict, api.BadRequest("conflict", "")),
	api.When(checkout.ErrCheckoutFailed, api.BadRequest("checkout_failed", "")),
}

// fail maps the flow's errors by contract; others go to the API as they are.
func fail(err error) error {
	if stream.IsUnavailable(err) {
		return err
	}
	return api.MapError(err, contract...)
}

// seen returns the contract's not-found failure unless the caller sees
// every (kind, id) pair of named: another tenant's ids do not exist.
func seen(c *fiber.Ctx, named ...string) error {
	v := api.View(c)
	if v.All {
		return nil
	}
	for i := 0; i+1 < len(named); i += 2 {
		if !checkout.Sees(v, named[i+1]) {
			return fail(fmt.Errorf("%w: %s %s", checkout.ErrNotFound, named[i], named[i+1]))
		}
	}
	return nil
}

// batch runs a batch_init over the integer path parameters names.
func batch(c *fiber.Ctx, msg string, run func(ctx context.Context, v []int64) error, names ...string) error {
	v := make([]int64, len(names))
	for i, name := range names {
		var err error
		if v[i], err = intParam(c, name); err != nil {
			return err
		}
	}
	return api.Reply(c, message{Msg: msg}, fail(run(c.UserContext(), v)))
}

// intParam parses an integer path parameter; 400 if it is not one.
func intParam(c *fiber.Ctx, name string) (int64, error) {
	s := c.Params(name)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, api.BadRequest("invalid", name+" must be an integer, got "+strconv.Quote(s))
	}
	return n, nil
}

func (r routes) createItem(c *fiber.Ctx) error {
	price, err := intParam(c, "price")
	if err != nil {
		return err
	}
	id, err := r.f.Store().CreateItemOf(c.UserContext(), api.Tenant(c), price)
	return api.Reply(c, itemID{ItemID: id}, fail(err))
}

func (r routes) findItem(c *fiber.Ctx) error {
	if err := seen(c, "item", c.Params("item_id")); err != nil {
		return err
	}
	stock, price, err := r.f.Store().FindItem(c.UserContext(), c.Params("item_id"))
	return api.Reply(c, itemOut{Stock: stock, Price: price}, fail(err))
}

func stockOf(id string, n int64) any  { return stockOut{ItemID: id, Stock: n} }
func creditOf(id string, n int64) any { return userOut{UserID: id, Credit: n} }

// change returns the handler applying apply to the entity of kind named
// by the path and the amount parameter; out is its answer.
func change(kind string, apply func(ctx context.Context, id string, amount int64) (int64, error), out func(string, int64) any) fiber.Handler {
	return func(c *fiber.Ctx) error {
		amount, err := intParam(c, "amount")
		if err != nil {
			return err
		}
		id := c.Params(kind + "_id")
		if err := seen(c, kind, id); err != nil {
			return err
		}
		n, err := apply(c.UserContext(), id, amount)
		return api.Reply(c, out(id, n), fail(err))
	}
}

func (r routes) batchItems(c *fiber.Ctx) error {
	return batch(c, "Batch init for stock successful", func(ctx context.Context, v []int64) error {
		return r.f.Store().BatchInitItems(ctx, v[0], v[1], v[2])
	}, "n", "starting_stock", "item_price")
}

func (r routes) createUser(c *fiber.Ctx) error {
	id, err := r.f.Store().CreateUserOf(c.UserContext(), api.Tenant(c))
	return api.Reply(c, userID{UserID: id}, fail(err))
}

func (r routes) findUser(c *fiber.Ctx) error {
	id := c.Params("user_id")
	if err := seen(c, "user", id); err != nil {
		return err
	}
	credit, err := r.f.Store().FindUser(c.UserContext(), id)
	return api.Reply(c, userOut{UserID: id, Credit: credit}, fail(err))
}

func (r routes) batchUsers(c *fiber.Ctx) error {
	return batch(c, "Batch init for users successful", func(ctx context.Context, v []int64) error {
		return r.f.Store().BatchInitUsers(ctx, v[0], v[1])
	}, "n", "starting_money")
}

func (r routes) createOrder(c *fiber.Ctx) error {
	if err := seen(c, "user", c.Params("user_id")); err != nil {
		return err
	}
	id, err := r.f.Store().CreateOrder(c.UserContext(), c.Params("user_id"))
	return api.Reply(c, orderID{OrderID: id}, fail(err))
}

func (r routes) findOrder(c *fiber.Ctx) error {
	if err := seen(c, "order", c.Params("order_id")); err != nil {
		return err
	}
	o, err := r.f.Store().FindOrder(c.UserContext(), c.Params("order_id"))
	if err != nil {
		return fail(err)
	}
	items := make([][]any, len(o.Lines))
	for i, l := range o.Lines {
		items[i] = []any{l.ID, l.Amount}
	}
	return c.JSON(orderOut{OrderID: o.ID, Paid: o.Paid, Items: items, UserID: o.UserID, TotalCost: o.TotalCost})
}

func (r routes) addItem(c *fiber.Ctx) error {
	qty, err := int64(1), error(nil)
	if c.Params("quantity") != "" {
		if qty, err = intParam(c, "quantity"); err != nil {
			return err
		}
	}
	id := c.Params("order_id")
	if err := seen(c, "order", id, "item", c.Params("item_id")); err != nil {
		return err
	}
	total, err := r.f.Store().AddItem(c.UserContext(), id, c.Params("item_id"), qty)
	return api.Reply(c, addItemOut{OrderID: id, TotalCost: total}, fail(err))
}

func (r routes) checkout(c *fiber.Ctx) error {
	if err := seen(c, "order", c.Params("order_id")); err != nil {
		return err
	}
	res, err := r.f.Checkout(c.UserContext(), c.Params("order_id"))
	if err != nil {
		return fail(err)
	}
	return c.JSON(checkoutOut{OrderID: res.OrderID, Paid: true, TrNum: res.TrNum, AlreadyPaid: res.AlreadyPaid})
}

func (r routes) batchOrders(c *fiber.Ctx) error {
	return batch(c, "Batch init for orders successful", func(ctx context.Context, v []int64) error {
		return r.f.Store().BatchInitOrders(ctx, v[0], v[1], v[2], v[3])
	}, "n", "n_items", "n_users", "item_price")
}
