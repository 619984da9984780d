package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/dropstream/dropstream/flows/offer"
)

// OfferRoutes are the sell-offer routes (seed 002): the offers of every
// handler, complex filter searches over them, their cached results, and
// order prices.
type OfferRoutes struct {
	Service *offer.Service
}

// offerPage is GET /v1/offers.
type offerPage struct {
	Items      []offer.Offer `json:"items"`
	NextCursor string        `json:"next_cursor,omitempty"`
	// Cached says a productId or sellerId listing came from the
	// TranslateIds cache.
	Cached bool `json:"cached,omitempty"`
}

// Register adds the routes to srv.
func (r OfferRoutes) Register(srv *Server) {
	srv.Handle(Operation{Method: "POST", Path: "/v1/offers", Tag: "offers", Scope: ScopeWrite,
		Summary: "Create or replace a sell offer (201 created, 200 replaced); its handler is recorded in the SellOffers index",
		Body:    offer.Offer{}, Response: offer.Offer{}, Status: http.StatusCreated, Handler: r.put})
	srv.Handle(Operation{Method: "GET", Path: "/v1/offers", Tag: "offers", Scope: ScopeRead,
		Summary:  "List sell offers, or those of one product or seller (through the TranslateIds cache)",
		Query:    []Param{{Name: "cursor"}, {Name: "limit", Type: "integer"}, {Name: "productId"}, {Name: "sellerId"}},
		Response: offerPage{}, Handler: r.list})
	srv.Handle(Operation{Method: "GET", Path: "/v1/offers/:id", Tag: "offers", Scope: ScopeRead,
		Summary: "One sell offer", Response: offer.Offer{}, Handler: r.get})
	srv.Handle(Operation{Method: "DELETE", Path: "/v1/offers/:id", Tag: "offers", Scope: ScopeWrite,
		Summary: "Delete a sell offer", Status: http.StatusNoContent, Handler: r.delete})
	srv.Handle(Operation{Method: "POST", Path: "/v1/offers/search", Tag: "offers", Scope: ScopeRead,
		Summary: "Complex filter search: 200 with the matches once the logical result is complete (cached, joined or " +
			"computed by every handler), or 202 with the result id and status processing after a bounded wait",
		Body: offer.SearchRequest{}, Response: offer.SearchResponse{}, Handler: r.search})
	srv.Handle(Operation{Method: "GET", Path: "/v1/offers/results/:id", Tag: "offers", Scope: ScopeRead,
		Summary:  "A page of a logical result: status processing, complete or expired",
		Query:    []Param{{Name: "offset", Type: "integer"}, {Name: "limit", Type: "integer"}},
		Response: offer.Result{}, Handler: r.result})
	srv.Handle(Operation{Method: "POST", Path: "/v1/offers/order-price", Tag: "offers", Scope: ScopeRead,
		Summary: "The price of an order (offer quantities, location, delivery and payment method) from the orderPrice " +
			"cache: status complete with the price, error with the reason, or processing",
		Body: offer.OrderPriceRequest{}, Response: offer.OrderPrice{}, Handler: r.orderPrice})
}

func (r OfferRoutes) put(c *fiber.Ctx) error {
	var o offer.Offer
	if err := DecodeJSON(c, &o); err != nil {
		return err
	}
	created, err := r.Service.Catalog().Put(c.UserContext(), o)
	switch {
	case errors.Is(err, offer.ErrInvalidOffer):
		return UnprocessableEntity("invalid_offer", err.Error())
	case errors.Is(err, offer.ErrConflict):
		return Conflict("offer_conflict", err.Error())
	case err != nil:
		return err
	}
	status := http.StatusOK
	if created[0] {
		status = http.StatusCreated
	}
	return c.Status(status).JSON(o)
}

func (r OfferRoutes) list(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	product, seller := c.Query("productId"), c.Query("sellerId")
	if product == "" && seller == "" {
		items, next, err := r.Service.Catalog().List(c.UserContext(), c.Query("cursor"), limit)
		if errors.Is(err, offer.ErrInvalidOffer) {
			return BadRequest("invalid_cursor", err.Error())
		}
		if err != nil {
			return err
		}
		return c.JSON(offerPage{Items: items, NextCursor: next})
	}
	if product != "" && seller != "" {
		return BadRequest("invalid_query", "give productId or sellerId, not both")
	}
	from, id := offer.FromProduct, product
	if seller != "" {
		from, id = offer.FromSeller, seller
	}
	start, err := intQuery(c, "cursor", 0, 0, 1<<30)
	if err != nil {
		return err
	}
	ids, cached, err := r.Service.Catalog().Translate(c.UserContext(), from, id, offer.ToSellOffer)
	if errors.Is(err, offer.ErrInvalidOffer) {
		return BadRequest("invalid_query", err.Error())
	}
	if err != nil {
		return err
	}
	page := offerPage{Items: []offer.Offer{}, Cached: cached}
	for i := start; i < len(ids) && len(page.Items) < limit; i++ {
		o, err := r.Service.Catalog().Get(c.UserContext(), ids[i])
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

func (r OfferRoutes) get(c *fiber.Ctx) error {
	o, err := r.Service.Catalog().Get(c.UserContext(), c.Params("id"))
	if errors.Is(err, offer.ErrNotFound) {
		return NotFound("offer_not_found", "no offer "+c.Params("id"))
	}
	if err != nil {
		return err
	}
	return c.JSON(o)
}

func (r OfferRoutes) delete(c *fiber.Ctx) error {
	err := r.Service.Catalog().Delete(c.UserContext(), c.Params("id"))
	switch {
	case errors.Is(err, offer.ErrNotFound):
		return NotFound("offer_not_found", "no offer "+c.Params("id"))
	case errors.Is(err, offer.ErrConflict):
		return Conflict("offer_conflict", err.Error())
	case err != nil:
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

func (r OfferRoutes) search(c *fiber.Ctx) error {
	var req offer.SearchRequest
	if err := DecodeJSON(c, &req); err != nil {
		return err
	}
	resp, err := r.Service.Search(c.UserContext(), req, RequestID(c))
	switch {
	case errors.Is(err, offer.ErrInvalidFilter):
		return UnprocessableEntity("invalid_filter", err.Error())
	case errors.Is(err, offer.ErrGone):
		return NewError(http.StatusGone, "result_gone", "the result of request id "+req.RequestID+" has expired; send a new request id to compute it again")
	case err != nil:
		return err
	}
	if resp.Status == offer.StatusProcessing {
		c.Set(fiber.HeaderLocation, "/v1/offers/results/"+resp.ResultID)
		return c.Status(http.StatusAccepted).JSON(resp)
	}
	return c.JSON(resp)
}

func (r OfferRoutes) result(c *fiber.Ctx) error {
	offset, err := intQuery(c, "offset", 0, 0, offer.MaxListOffset)
	if err != nil {
		return err
	}
	limit, err := intQuery(c, "limit", offer.DefaultPageSize, 1, offer.MaxPageSize)
	if err != nil {
		return err
	}
	res, err := r.Service.Result(c.UserContext(), c.Params("id"), offset, limit)
	if errors.Is(err, offer.ErrNotFound) {
		return NotFound("result_not_found", "no result "+c.Params("id"))
	}
	if err != nil {
		return err
	}
	return c.JSON(res)
}

func (r OfferRoutes) orderPrice(c *fiber.Ctx) error {
	var req offer.OrderPriceRequest
	if err := DecodeJSON(c, &req); err != nil {
		return err
	}
	op, err := r.Service.OrderPrice(c.UserContext(), req)
	if errors.Is(err, offer.ErrInvalidFilter) {
		return UnprocessableEntity("invalid_order", err.Error())
	}
	if err != nil {
		return err
	}
	return c.JSON(op)
}
