// Package httpapi serves the sell-offer flow over the API: the offers of
// every handler, complex filter searches over them, their cached results,
// and order prices.
package httpapi

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/offer"
)

// routes are the sell-offer handlers.
type routes struct {
	f *offer.Flow
}

// offerPage is GET /v1/offers.
type offerPage struct {
	Items      []offer.Offer `json:"items"`
	NextCursor string        `json:"next_cursor,omitempty"`
	// Cached: a productId or sellerId listing from the TranslateIds cache.
	Cached bool `json:"cached,omitempty"`
}

// Register adds the sell-offer routes over the flow f to srv.
func Register(srv *api.Server, f *offer.Flow) {
	r := routes{f: f}
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/offers", Tag: "offers", Scope: api.ScopeWrite, Class: api.ClassCreate,
		Summary: "Create or replace a sell offer (201 created, 200 replaced); its handler is recorded in the SellOffers index",
		Body:    offer.Offer{}, Response: offer.Offer{}, Status: http.StatusCreated, OtherStatuses: []int{http.StatusOK}, Handler: r.put})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/offers", Tag: "offers", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary:  "List sell offers, or those of one product or seller (through the TranslateIds cache)",
		Query:    []api.Param{{Name: "cursor"}, {Name: "limit", Type: "integer"}, {Name: "productId"}, {Name: "sellerId"}},
		Response: offerPage{}, Handler: r.list})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/offers/:id", Tag: "offers", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary: "One sell offer", Response: offer.Offer{}, Handler: r.get})
	srv.Handle(api.Operation{Method: "DELETE", Path: "/v1/offers/:id", Tag: "offers", Scope: api.ScopeWrite, Class: api.ClassChange,
		Summary: "Delete a sell offer", Status: http.StatusNoContent, Handler: r.delete})
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/offers/search", Tag: "offers", Scope: api.ScopeRead, Class: api.ClassCreate,
		Summary: "Complex filter search: 200 with the matches once the logical result is complete (cached, joined or " +
			"computed by every handler), or 202 with the result id and status processing after a bounded wait",
		Body: offer.SearchRequest{}, Response: offer.SearchResponse{}, OtherStatuses: []int{http.StatusAccepted}, Handler: r.search})
	srv.Handle(api.Operation{Method: "GET", Path: "/v1/offers/results/:id", Tag: "offers", Scope: api.ScopeRead, Class: api.ClassRead,
		Summary:  "A page of a logical result: status processing, complete or expired",
		Query:    []api.Param{{Name: "offset", Type: "integer"}, {Name: "limit", Type: "integer"}},
		Response: offer.Result{}, Handler: r.result})
	srv.Handle(api.Operation{Method: "POST", Path: "/v1/offers/order-price", Tag: "offers", Scope: api.ScopeRead, Class: api.ClassCreate,
		Summary: "The price of an order (offer quantities, location, delivery and payment method) from the orderPrice " +
			"cache: status complete with the price, error with the reason, or processing",
		Body: offer.OrderPriceRequest{}, Response: offer.OrderPrice{}, Handler: r.orderPrice})
	registerStanding(srv, r)
}

// offerConflict answers ErrConflict.
var offerConflict = api.When(offer.ErrConflict, api.Conflict("offer_conflict", ""))

// invalidFilter answers ErrInvalidFilter as a 422 with code.
func invalidFilter(code string) api.Case {
	return api.When(offer.ErrInvalidFilter, api.UnprocessableEntity(code, ""))
}

// offerNotFound answers ErrNotFound for the offer the route names.
func offerNotFound(c *fiber.Ctx) api.Case {
	return api.When(offer.ErrNotFound, api.NotFound("offer_not_found", "no offer "+c.Params("id")))
}

func (r routes) put(c *fiber.Ctx) error {
	o, err := api.Body[offer.Offer](c)
	if err != nil {
		return err
	}
	texts := []api.TextField{api.Text("offerId", o.ID), api.Text("handler", o.Handler), api.Text("productId", o.ProductID),
		api.Text("sellerId", o.SellerID)}
	for _, l := range o.Locations {
		texts = append(texts, api.Text("locations", l))
	}
	if err := api.CheckText(texts...); err != nil {
		return err
	}
	created, err := r.f.Catalog().PutFor(c.UserContext(), api.View(c), o)
	if err != nil {
		return api.MapError(err, api.When(offer.ErrTaken, api.Conflict("offer_id_taken", "another offer holds id "+o.ID+"; choose another id")),
			api.When(offer.ErrInvalidOffer, api.UnprocessableEntity("invalid_offer", "")), offerConflict)
	}
	return api.Created(c, created, o)
}

func (r routes) list(c *fiber.Ctx) error {
	limit, err := api.IntQuery(c, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	product, seller := c.Query("productId"), c.Query("sellerId")
	if product == "" && seller == "" {
		items, next, err := r.f.Catalog().List(c.UserContext(), c.Query("cursor"), limit)
		return api.Reply(c, offerPage{Items: items, NextCursor: next}, err, api.When(offer.ErrInvalidOffer, api.BadRequest("invalid_cursor", "")))
	}
	if product != "" && seller != "" {
		return api.BadRequest("invalid_query", "give productId or sellerId, not both")
	}
	from, id := offer.FromProduct, product
	if seller != "" {
		from, id = offer.FromSeller, seller
	}
	start, err := api.IntQuery(c, "cursor", 0, 0, 1<<30)
	if err != nil {
		return err
	}
	ids, cached, err := r.f.Catalog().Translate(c.UserContext(), from, id, offer.ToSellOffer)
	if err != nil {
		return api.MapError(err, api.When(offer.ErrInvalidOffer, api.BadRequest("invalid_query", "")))
	}
	page := offerPage{Items: []offer.Offer{}, Cached: cached}
	for i := start; i < len(ids) && len(page.Items) < limit; i++ {
		o, err := r.f.Catalog().Get(c.UserContext(), ids[i])
		if errors.Is(err, offer.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		page.Items = append(page.Items, o)
		if i+1 < len(ids) && len(page.Items) == limit {
			page.NextCursor = strconv.Itoa(i + 1)
		}
	}
	return c.JSON(page)
}

func (r routes) get(c *fiber.Ctx) error {
	err := r.f.Catalog().Sees(c.UserContext(), api.View(c), c.Params("id"))
	var o offer.Offer
	if err == nil {
		o, err = r.f.Catalog().Get(c.UserContext(), c.Params("id"))
	}
	return api.Reply(c, o, err, offerNotFound(c))
}

func (r routes) delete(c *fiber.Ctx) error {
	err := r.f.Catalog().DeleteIn(c.UserContext(), api.View(c), c.Params("id"))
	return api.NoContent(c, err, offerNotFound(c), offerConflict)
}

func (r routes) search(c *fiber.Ctx) error {
	req, err := api.Body[offer.SearchRequest](c)
	if err != nil {
		return err
	}
	resp, err := r.f.Search(c.UserContext(), req, api.RequestID(c))
	if err != nil {
		return api.MapError(err, invalidFilter("invalid_filter"), api.When(offer.ErrGone, api.NewError(http.StatusGone, "result_gone",
			"the result of request id "+req.RequestID+" has expired; send a new request id to compute it again")))
	}
	if resp.Status == offer.StatusProcessing {
		c.Set(fiber.HeaderLocation, "/v1/offers/results/"+resp.ResultID)
		return c.Status(http.StatusAccepted).JSON(resp)
	}
	return c.JSON(resp)
}

func (r routes) result(c *fiber.Ctx) error {
	offset, err := api.IntQuery(c, "offset", 0, 0, offer.MaxListOffset)
	if err != nil {
		return err
	}
	limit, err := api.IntQuery(c, "limit", offer.DefaultPageSize, 1, offer.MaxPageSize)
	if err != nil {
		return err
	}
	res, err := r.f.Result(c.UserContext(), c.Params("id"), offset, limit)
	return api.Reply(c, res, err, api.When(offer.ErrNotFound, api.NotFound("result_not_found", "no result "+c.Params("id"))))
}

func (r routes) orderPrice(c *fiber.Ctx) error {
	req, err := api.Body[offer.OrderPriceRequest](c)
	if err != nil {
		return err
	}
	op, err := r.f.OrderPrice(c.UserContext(), req)
	return api.Reply(c, op, err, invalidFilter("invalid_order"))
}
