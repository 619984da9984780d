// Package httpapi serves the comic flow over the API: the comic schema,
// comics, subscriptions, pattern statistics and purchases under /v1, and
// the short paths of its first clients (POST /comics, POST /subscriptions,
// POST /completetransaction).
package httpapi

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/comic"
	"github.com/dropstream/dropstream/internal/clip"
)

// routes are the comic flow's handlers.
type routes struct {
	f *comic.Flow
}

// createdComic is the answer of POST /v1/comics.
type createdComic struct {
	comic.Listing
	// Created is false when the comic was already in inventory (nothing
	// was written, no new notification job).
	Created bool `json:"created"`
}

// comicDetail is GET /v1/comics/{id}.
type comicDetail struct {
	Listing *comic.Listing `json:"listing,omitempty"`
	Status  comic.Status   `json:"status"`
	Sales   []comic.Sale   `json:"sales"`
}

// subscriptionIn is the body of POST /v1/subscriptions.
type subscriptionIn struct {
	Email string `json:"email"`
	// Body is a partial comic (see /v1/schemas/comic.json; no field required).
	Body comic.BodyJSON `json:"body"`
	// NotifyURL is the subscriber's own POST /notify destination.
	NotifyURL string `json:"notify_url,omitempty"`
}

type subscriptionPage = api.Page[comic.Subscription]

// transactionIn is the body of POST /v1/completetransaction.
type transactionIn struct {
	Email string          `json:"email"`
	Comic json.RawMessage `json:"comic"` // the comic's id, or the comic
	// Payment is the buyer's payment reference.
	Payment string `json:"payment"`
	// TxnID makes the purchase idempotent; default: derived from (email,
	// comic id, listing).
	TxnID string `json:"txn_id,omitempty"`
	// HoldToken is the buyer's notification's hold_token.
	HoldToken string `json:"hold_token,omitempty"`
}

// Register adds the comic flow f's routes to srv.
func Register(srv *api.Server, f *comic.Flow) {
	r := routes{f: f}
	handle(srv, api.ClassRead, api.Operation{Method: "GET", Summary: "The comic JSON Schema (a subscription body is a partial comic)",
		ContentType: "application/schema+json", Response: map[string]any{}, Handler: r.schema}, "/v1/schemas/comic.json")
	handle(srv, api.ClassContract, api.Operation{Method: "POST",
		Summary: "List a comic for sale: inventory and its notification job in one atomic step (201; 200 when already listed); " +
			"hold_seconds sets the hold of each wave of subscribers told (default: the flow's)",
		Query: []api.Param{{Name: "hold_seconds", Type: "integer"}}, Body: comic.Comic{}, Response: createdComic{}, Status: http.StatusCreated, OtherStatuses: []int{http.StatusOK}, Handler: r.createComic},
		"/v1/comics", "/comics")
	handle(srv, api.ClassRead, api.Operation{Method: "GET", Summary: "Subscriptions per SearchPattern (with shards) and the diversity of each field",
		Response: comic.Stats{}, Handler: r.stats}, "/v1/comics/patterns/stats")
	handle(srv, api.ClassRead, api.Operation{Method: "GET",
		Summary:  "A comic's latest listing: its waves of subscribers told, in lottery order, with their notifications, the hold in force and the sales",
		Response: comic.HoldTimeline{}, Handler: r.timeline}, "/v1/comics/:id/timeline")
	handle(srv, api.ClassRead, api.Operation{Method: "GET", Summary: "A comic's listing, notification job status and sales",
		Response: comicDetail{}, Handler: r.getComic}, "/v1/comics/:id")
	handle(srv, api.ClassCreate, api.Operation{Method: "POST", Summary: "Subscribe an email to comics matching a partial comic; 409 for a duplicate (email, body)",
		Body: subscriptionIn{}, Response: comic.Subscription{}, Status: http.StatusCreated, Handler: r.subscribe}, "/v1/subscriptions", "/subscriptions")
	handle(srv, api.ClassRead, api.Operation{Method: "GET", Summary: "The subscriptions of an email, by id",
		Query:    []api.Param{{Name: "email", Required: true}, {Name: "cursor"}, {Name: "limit", Type: "integer"}},
		Response: subscriptionPage{}, Handler: r.listSubscriptions}, "/v1/subscriptions")
	handle(srv, api.ClassChange, api.Operation{Method: "DELETE", Summary: "Unsubscribe", Status: http.StatusNoContent, Handler: r.deleteSubscription},
		"/v1/subscriptions/:id")
	handle(srv, api.ClassContract, api.Operation{Method: "POST",
		Summary: "Buy a comic: charge, sell and remove from inventory; when it is gone, refund and answer 409 sold_out; " +
			"during a hold without its wave's hold_token, 409 hold_active with Retry-After (nothing charged)",
		Body: transactionIn{}, Response: comic.Receipt{}, Handler: r.purchase}, "/v1/completetransaction", "/completetransaction")
}

// handle registers op on each of paths under the tag "comics", limited
// as class: a read (api.ClassRead) needs the read scope, any other class
// the write scope.
func handle(srv *api.Server, class api.Class, op api.Operation, paths ...string) {
	op.Tag, op.Class, op.Scope = "comics", class, api.ScopeWrite
	if class == api.ClassRead {
		op.Scope = api.ScopeRead
	}
	for _, p := range paths {
		op.Path = p
		srv.Handle(op)
	}
}

func (r routes) schema(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, "application/schema+json")
	return c.Send(comic.JSONSchema())
}

// invalid maps a validation error (a *comic.FieldError, naming the field)
// to 422.
func invalid(code string, err error) error { return api.UnprocessableEntity(code, err.Error()) }

func (r routes) createComic(c *fiber.Ctx) error {
	var raw json.RawMessage
	if err := api.DecodeJSON(c, &raw); err != nil {
		return err
	}
	parsed, err := comic.ParseComic(raw)
	if err != nil {
		return invalid("invalid_comic", err)
	}
	hold := c.QueryInt("hold_seconds", 0)
	if hold < 0 || hold > int(comic.MaxHoldWindow.Seconds()) || c.Query("hold_seconds") != "" && hold == 0 {
		return api.UnprocessableEntity("invalid_comic", "query hold_seconds: want 1.."+strconv.Itoa(int(comic.MaxHoldWindow.Seconds())))
	}
	l, created, err := r.f.Inventory.AddHeld(c.UserContext(), parsed, time.Duration(hold)*time.Second)
	if err != nil {
		return err // the store failed; nothing was written
	}
	return api.Created(c, created, createdComic{Listing: l, Created: created})
}

func (r routes) getComic(c *fiber.Ctx) error {
	id := c.Params("id")
	st, err := comic.Status{}, comic.ErrNotFound
	if validComicID(id) {
		st, err = r.f.Inventory.Status(c.UserContext(), id)
	}
	if err != nil {
		return api.MapError(err, notFound("comic", id))
	}
	out := comicDetail{Status: st, Sales: []comic.Sale{}}
	if st.InInventory {
		l, err := r.f.Inventory.Get(c.UserContext(), id)
		if err != nil && !errors.Is(err, comic.ErrNotFound) {
			return err
		}
		if err == nil {
			out.Listing = &l
		}
	}
	if r.f.Sales != nil {
		sales, err := r.f.Sales.Sales(c.UserContext(), id)
		if err != nil {
			return err
		}
		out.Sales = append(out.Sales, sales...)
	}
	return c.JSON(out)
}

func (r routes) timeline(c *fiber.Ctx) error {
	id := c.Params("id")
	tl, err := comic.HoldTimeline{}, comic.ErrNotFound
	if validComicID(id) {
		tl, err = r.f.Timeline(c.UserContext(), id)
	}
	return api.Reply(c, tl, err, notFound("comic", id))
}

func (r routes) stats(c *fiber.Ctx) error {
	st, err := r.f.Subscriptions.Stats(c.UserContext())
	return api.Reply(c, st, err)
}

func (r routes) subscribe(c *fiber.Ctx) error {
	in, err := api.Body[subscriptionIn](c)
	if err != nil {
		return err
	}
	if len(in.Body) == 0 {
		return api.UnprocessableEntity("invalid_subscription", "field body: required (use {} for every comic)")
	}
	if in.NotifyURL, err = r.f.Egress().NormalizeURL(in.NotifyURL); err != nil {
		return api.UnprocessableEntity("invalid_subscription", "field notify_url: "+err.Error())
	}
	slot, err := api.Reserve(c, r.f.SubscriptionQuota(), "comic subscriptions")
	if err != nil {
		return err
	}
	sub, err := r.f.Subscriptions.CreateFor(c.UserContext(), api.Tenant(c), in.Email, json.RawMessage(in.Body), in.NotifyURL)
	if slotErr := api.Settle(c, slot, sub.ID, true, err); slotErr != nil {
		return errors.Join(err, slotErr)
	}
	if errors.Is(err, comic.ErrInvalid) {
		return invalid("invalid_subscription", err)
	}
	if err != nil {
		return api.MapError(err, api.When(comic.ErrDuplicate, api.Conflict("duplicate_subscription", "this email is already subscribed to this body")),
			api.When(comic.ErrTooMany, api.Conflict("too_many_subscriptions", "")))
	}
	return c.Status(http.StatusCreated).JSON(sub)
}

func (r routes) listSubscriptions(c *fiber.Ctx) error {
	return api.ListAll(c, func(s comic.Subscription) string { return s.ID }, func() ([]comic.Subscription, error) {
		subs, err := r.f.Subscriptions.ByEmailIn(c.UserContext(), api.View(c), c.Query("email"))
		return subs, api.MapError(err, api.When(comic.ErrInvalid, api.BadRequest("invalid_email", "")))
	})
}

func (r routes) deleteSubscription(c *fiber.Ctx) error {
	id := c.Params("id")
	err := comic.ErrNotFound
	if validComicID(id) {
		err = r.f.Subscriptions.DeleteIn(c.UserContext(), api.View(c), id)
	}
	if err != nil {
		return api.MapError(err, notFound("subscription", id))
	}
	return api.Deleted(c, r.f.SubscriptionQuota(), id)
}

func (r routes) purchase(c *fiber.Ctx) error {
	if r.f.Sales == nil {
		return api.NewError(http.StatusNotImplemented, "purchase_unavailable", "purchases need the checkout saga, which is not configured")
	}
	in, err := api.Body[transactionIn](c)
	if err != nil {
		return err
	}
	id, err := comicRef(in.Comic)
	if err != nil {
		return invalid("invalid_transaction", err)
	}
	if in.Payment == "" || len(in.Payment) > 256 {
		return api.UnprocessableEntity("invalid_transaction", "field payment: want 1..256 characters")
	}
	email, err := comic.NormalizeEmail(in.Email)
	if err != nil {
		return invalid("invalid_transaction", err)
	}
	// An empty txn_id is the default one of (email, comic, listing).
	if len(in.HoldToken) > 128 {
		return api.UnprocessableEntity("invalid_transaction", "field hold_token: want at most 128 characters")
	}
	rec, err := r.f.Sales.Purchase(c.UserContext(), email, id, in.Payment, in.TxnID, in.HoldToken)
	if held := (*comic.HoldError)(nil); errors.As(err, &held) {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(max(1, int(math.Ceil(time.Until(held.EndsAt).Seconds())))))
		return api.Conflict("hold_active", "this comic is held for the subscribers told of it until "+
			held.EndsAt.Format(time.RFC3339)+"; buy with the hold_token of your notification, or after the hold")
	}
	if errors.Is(err, comic.ErrInvalid) {
		return invalid("invalid_transaction", err)
	}
	return api.Reply(c, rec, err, api.When(comic.ErrSoldOut, api.Conflict("sold_out", comic.SorryMessage)),
		api.When(comic.ErrPayment, api.NewError(http.StatusPaymentRequired, "payment_refused", "the payment was refused")))
}

// comicRef returns the id a transaction names: a string id, or the id of
// a full comic object.
func comicRef(raw json.RawMessage) (string, error) {
	s := strings.TrimSpace(string(raw))
	if strings.HasPrefix(s, `"`) {
		var id string
		if err := json.Unmarshal(raw, &id); err != nil || !validComicID(id) {
			return "", &comic.FieldError{Field: "comic", Reason: "want a comic id (32 hex digits) or a comic"}
		}
		return id, nil
	}
	if s == "" || s == "null" {
		return "", &comic.FieldError{Field: "comic", Reason: "required"}
	}
	c, err := comic.ParseComic(raw)
	if err != nil {
		var fe *comic.FieldError
		if errors.As(err, &fe) {
			fe.Field = strings.TrimSuffix("comic."+fe.Field, ".")
		}
		return "", err
	}
	return c.ID(), nil
}

// validComicID reports whether s is a comic id: 32 lower-case hex digits.
func validComicID(s string) bool {
	return len(s) == 32 && strings.Trim(s, "0123456789abcdef") == ""
}

// notFound answers ErrNotFound as the 404 "<what>_not_found" of the id a
// route names.
func notFound(what, id string) api.Case {
	return api.When(comic.ErrNotFound, api.NotFound(what+"_not_found", "no "+what+" "+clip.String(id, 64)))
}
