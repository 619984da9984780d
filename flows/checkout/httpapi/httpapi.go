// Package httpapi serves the checkout flow's order/stock/payment HTTP
// contract on the API server: plain paths with the /stock, /payment and
// /orders prefixes, ids as strings, amounts as integers, every body JSON
// (application/json, errors included). Success is 200; every failure the
// contract names — an unknown id, short stock or credit, a failed
// checkout, malformed input — is 400 with the JSON error envelope
// {"error":{"code","message"}}.
//
// A checkout answers 200 only once the order is paid and its stock taken,
// and 400 only once its attempt has failed and every compensation has been
// applied — also when its wait for the saga expires (the flow's
// Config.Timeout): the contract has no "still running" answer, so the call
// gives the attempt up and undoes what it applied before answering 400
// "checkout_failed" with the reason "no answer from <part> in time" (or
// 200, if the saga succeeded meanwhile); nothing was charged and the order
// may be checked out again.
//
// A Redis that cannot be reached for a moment (a restart replaying its
// append-only file, a failover) is not an answer: a call keeps trying
// within its own deadline — a checkout within its wait, every other route
// within the flow's Config.RetryFor — and every write it repeats is
// idempotent. Only an outage longer than that answers outside the
// contract: 503 "unavailable" with Retry-After — as is a change the
// replicas did not confirm in time when the flow waits for them
// (checkout.Config.Wait): applied, but not yet safe from a failover, its
// outcome unknown to the caller; a checkout whose attempt
// had started then completes or is compensated by the stages and the
// sweeper, and checking out again answers its outcome. Another Redis
// failure is 500 ("checkout_pending" for a checkout whose outcome is not
// known).
package httpapi

import (
	"context"
	"errors"
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
	op("POST", "/stock/add/:item_id/:amount", "Add stock", w, stockOut{}, r.addStock)
	op("POST", "/stock/subtract/:item_id/:amount", "Take stock; 400 if it would go below 0", w, stockOut{}, r.subtractStock)
	op("POST", "/stock/batch_init/:n/:starting_stock/:item_price", "Create or reset items \"0\"..\"n-1\"", adm, message{}, r.batchItems)
	op("POST", "/payment/create_user", "Create a user with credit 0", w, userID{}, r.createUser)
	op("GET", "/payment/find_user/:user_id", "A user's credit", rd, userOut{}, r.findUser)
	op("POST", "/payment/add_funds/:user_id/:amount", "Add credit", w, userOut{}, r.addFunds)
	op("POST", "/payment/pay/:user_id/:amount", "Take credit; 400 if it would go below 0", w, userOut{}, r.pay)
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
	switch {
	case errors.Is(err, checkout.ErrNotFound):
		return api.NotFound("order_not_found", err.Error())
	case errors.Is(err, checkout.ErrInvalid):
		return api.BadRequest("invalid", err.Error())
	case errors.Is(err, checkout.ErrConflict):
		return api.Conflict("not_running", err.Error())
	case err != nil:
		return err
	}
	return c.JSON(out)
}

func (r routes) timeline(c *fiber.Ctx) error {
	if !api.SeesAll(c) && !checkout.Sees(api.View(c), c.Params("order_id")) {
		return api.NotFound("order_not_found", "no order "+c.Params("order_id"))
	}
	tl, err := r.f.Timeline(c.UserContext(), c.Params("order_id"))
	switch {
	case errors.Is(err, checkout.ErrNotFound):
		return api.NotFound("order_not_found", "no order "+c.Params("order_id"))
	case errors.Is(err, checkout.ErrInvalid):
		return api.BadRequest("invalid", err.Error())
	case err != nil:
		return err
	}
	return c.JSON(tl)
}

// fail maps the flow's errors to the contract's 400; a checkout whose
// outcome is not known is a 500 "checkout_pending", other errors are
// returned as they are: the API answers a Redis outage 503 with
// Retry-After, anything else 500.
func fail(err error) error {
	code := ""
	switch {
	case stream.IsUnavailable(err):
		return err
	case errors.Is(err, checkout.ErrPending):
		return api.NewError(http.StatusInternalServerError, "checkout_pending",
			"the checkout's outcome is not known yet; it will complete or be compensated: check the order out again for its outcome")
	case errors.Is(err, checkout.ErrNotFound):
		code = "not_found"
	case errors.Is(err, checkout.ErrInsufficient):
		code = "insufficient"
	case errors.Is(err, checkout.ErrInvalid):
		code = "invalid"
	case errors.Is(err, checkout.ErrConflict):
		code = "conflict"
	case errors.Is(err, checkout.ErrCheckoutFailed):
		code = "checkout_failed"
	default:
		return err
	}
	return api.BadRequest(code, err.Error())
}

// seen returns the contract's not-found failure unless the caller sees
// every (kind, id) pair of named: another tenant's item, user or order
// answers as one that does not exist. On an open API, and for admin keys,
// it costs nothing.
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

// intParam parses an integer path parameter; 400 if it is not one.
func intParam(c *fiber.Ctx, name string) (int64, error) {
	s := c.Params(name)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, api.BadRequest("invalid", name+" must be an integer, got "+strconv.Quote(s))
	}
	return n, nil
}

// intParams parses several integer path parameters.
func intParams(c *fiber.Ctx, names ...string) ([]int64, error) {
	out := make([]int64, len(names))
	for i, n := range names {
		v, err := intParam(c, n)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (r routes) createItem(c *fiber.Ctx) error {
	price, err := intParam(c, "price")
	if err != nil {
		return err
	}
	id, err := r.f.Store().CreateItemOf(c.UserContext(), api.Tenant(c), price)
	if err != nil {
		return fail(err)
	}
	return c.JSON(itemID{ItemID: id})
}

func (r routes) findItem(c *fiber.Ctx) error {
	if err := seen(c, "item", c.Params("item_id")); err != nil {
		return err
	}
	stock, price, err := r.f.Store().FindItem(c.UserContext(), c.Params("item_id"))
	if err != nil {
		return fail(err)
	}
	return c.JSON(itemOut{Stock: stock, Price: price})
}

func (r routes) addStock(c *fiber.Ctx) error      { return r.stock(c, r.f.Store().AddStock) }
func (r routes) subtractStock(c *fiber.Ctx) error { return r.stock(c, r.f.Store().SubtractStock) }

func (r routes) stock(c *fiber.Ctx, change func(ctx context.Context, id string, amount int64) (int64, error)) error {
	amount, err := intParam(c, "amount")
	if err != nil {
		return err
	}
	id := c.Params("item_id")
	if err := seen(c, "item", id); err != nil {
		return err
	}
	n, err := change(c.UserContext(), id, amount)
	if err != nil {
		return fail(err)
	}
	return c.JSON(stockOut{ItemID: id, Stock: n})
}

func (r routes) batchItems(c *fiber.Ctx) error {
	v, err := intParams(c, "n", "starting_stock", "item_price")
	if err != nil {
		return err
	}
	if err := r.f.Store().BatchInitItems(c.UserContext(), v[0], v[1], v[2]); err != nil {
		return fail(err)
	}
	return c.JSON(message{Msg: "Batch init for stock successful"})
}

func (r routes) createUser(c *fiber.Ctx) error {
	id, err := r.f.Store().CreateUserOf(c.UserContext(), api.Tenant(c))
	if err != nil {
		return fail(err)
	}
	return c.JSON(userID{UserID: id})
}

func (r routes) findUser(c *fiber.Ctx) error {
	id := c.Params("user_id")
	if err := seen(c, "user", id); err != nil {
		return err
	}
	credit, err := r.f.Store().FindUser(c.UserContext(), id)
	if err != nil {
		return fail(err)
	}
	return c.JSON(userOut{UserID: id, Credit: credit})
}

func (r routes) addFunds(c *fiber.Ctx) error { return r.credit(c, r.f.Store().AddFunds) }
func (r routes) pay(c *fiber.Ctx) error      { return r.credit(c, r.f.Store().Pay) }

func (r routes) credit(c *fiber.Ctx, change func(ctx context.Context, id string, amount int64) (int64, error)) error {
	amount, err := intParam(c, "amount")
	if err != nil {
		return err
	}
	id := c.Params("user_id")
	if err := seen(c, "user", id); err != nil {
		return err
	}
	n, err := change(c.UserContext(), id, amount)
	if err != nil {
		return fail(err)
	}
	return c.JSON(userOut{UserID: id, Credit: n})
}

func (r routes) batchUsers(c *fiber.Ctx) error {
	v, err := intParams(c, "n", "starting_money")
	if err != nil {
		return err
	}
	if err := r.f.Store().BatchInitUsers(c.UserContext(), v[0], v[1]); err != nil {
		return fail(err)
	}
	return c.JSON(message{Msg: "Batch init for users successful"})
}

func (r routes) createOrder(c *fiber.Ctx) error {
	if err := seen(c, "user", c.Params("user_id")); err != nil {
		return err
	}
	id, err := r.f.Store().CreateOrder(c.UserContext(), c.Params("user_id"))
	if err != nil {
		return fail(err)
	}
	return c.JSON(orderID{OrderID: id})
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
	qty := int64(1)
	if c.Params("quantity") != "" {
		q, err := intParam(c, "quantity")
		if err != nil {
			return err
		}
		qty = q
	}
	id := c.Params("order_id")
	if err := seen(c, "order", id, "item", c.Params("item_id")); err != nil {
		return err
	}
	total, err := r.f.Store().AddItem(c.UserContext(), id, c.Params("item_id"), qty)
	if err != nil {
		return fail(err)
	}
	return c.JSON(addItemOut{OrderID: id, TotalCost: total})
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
	v, err := intParams(c, "n", "n_items", "n_users", "item_price")
	if err != nil {
		return err
	}
	if err := r.f.Store().BatchInitOrders(c.UserContext(), v[0], v[1], v[2], v[3]); err != nil {
		return fail(err)
	}
	return c.JSON(message{Msg: "Batch init for orders successful"})
}
