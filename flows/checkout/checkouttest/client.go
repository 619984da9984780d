package checkouttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// Client drives the contract at Base and records every call it makes
// through Rec as client ID. Setup calls (creating items, users and
// orders) are not recorded: a model starts each key at 0, unpaid.
type Client struct {
	Base string
	HTTP *http.Client
	Rec  *Recorder
	ID   int
}

// call sends a request and decodes a 200's body into out. The status is 0
// when no answer came; code is the error envelope's code of a non-200 (or
// the transport error of no answer).
func (c *Client) call(ctx context.Context, method, path string, out any) (status int, code string) {
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return 0, "timeout"
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return 0, connectionRefused
		}
		return 0, "transport error"
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, "body cut"
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return resp.StatusCode, e.Error.Code
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return 0, "undecodable 200"
		}
	}
	return http.StatusOK, ""
}

// do makes a recorded call. A 200 decodes into body, and fill reads the
// answer from it; refused lists the 400 codes that mean "not changed".
func (c *Client) do(ctx context.Context, in Input, method, path string, body any, fill func(*Output), refused ...string) Output {
	done := c.Rec.Begin(c.ID, in)
	status, code := c.call(ctx, method, path, body)
	out := Output{Status: status, Code: code}
	switch {
	case status == http.StatusOK:
		out.Outcome = OK
		fill(&out)
	case code == connectionRefused:
		out.Outcome = NotSent
	case status == 0 || status >= 500 || status == http.StatusTooManyRequests:
		out.Outcome = Unknown
	case status == http.StatusBadRequest && contains(refused, code):
		out.Outcome = Refused
	default:
		out.Outcome = Rejected
	}
	done(out)
	return out
}

// connectionRefused is the code of a call whose connection was refused.
const connectionRefused = "connection refused"

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func n(v int64) string { return strconv.FormatInt(v, 10) }

type stockBody struct {
	Stock int64 `json:"stock"`
}

type creditBody struct {
	Credit int64 `json:"credit"`
}

// AddStock adds n units to item.
func (c *Client) AddStock(ctx context.Context, item string, amount int64) Output {
	var b stockBody
	return c.do(ctx, Input{Kind: AddStock, Key: item, Amount: amount}, http.MethodPost, "/stock/add/"+item+"/"+n(amount), &b,
		func(o *Output) { o.Value = b.Stock })
}

// SubtractStock takes n units of item; refused when fewer are left.
func (c *Client) SubtractStock(ctx context.Context, item string, amount int64) Output {
	var b stockBody
	return c.do(ctx, Input{Kind: SubtractStock, Key: item, Amount: amount}, http.MethodPost, "/stock/subtract/"+item+"/"+n(amount), &b,
		func(o *Output) { o.Value = b.Stock }, "insufficient")
}

// FindStock reads item's stock.
func (c *Client) FindStock(ctx context.Context, item string) Output {
	var b stockBody
	return c.do(ctx, Input{Kind: FindStock, Key: item}, http.MethodGet, "/stock/find/"+item, &b,
		func(o *Output) { o.Value = b.Stock })
}

// AddFunds adds amount to user's credit.
func (c *Client) AddFunds(ctx context.Context, user string, amount int64) Output {
	var b creditBody
	return c.do(ctx, Input{Kind: AddFunds, Key: user, Amount: amount}, http.MethodPost, "/payment/add_funds/"+user+"/"+n(amount), &b,
		func(o *Output) { o.Value = b.Credit })
}

// Pay takes amount from user's credit; refused when it is short.
func (c *Client) Pay(ctx context.Context, user string, amount int64) Output {
	var b creditBody
	return c.do(ctx, Input{Kind: Pay, Key: user, Amount: amount}, http.MethodPost, "/payment/pay/"+user+"/"+n(amount), &b,
		func(o *Output) { o.Value = b.Credit }, "insufficient")
}

// FindUser reads user's credit.
func (c *Client) FindUser(ctx context.Context, user string) Output {
	var b creditBody
	return c.do(ctx, Input{Kind: FindUser, Key: user}, http.MethodGet, "/payment/find_user/"+user, &b,
		func(o *Output) { o.Value = b.Credit })
}

// Checkout checks o out: 200 paid (or already paid), or refused when the
// attempt failed and was compensated.
func (c *Client) Checkout(ctx context.Context, o *Order) Output {
	var b struct {
		Paid        bool `json:"paid"`
		AlreadyPaid bool `json:"already_paid"`
	}
	return c.do(ctx, Input{Kind: Checkout, Key: o.ID, Order: o}, http.MethodPost, "/orders/checkout/"+o.ID, &b,
		func(out *Output) { out.Paid, out.AlreadyPaid = b.Paid, b.AlreadyPaid }, "checkout_failed")
}

// FindOrder reads whether o is paid.
func (c *Client) FindOrder(ctx context.Context, o *Order) Output {
	var b struct {
		Paid bool `json:"paid"`
	}
	return c.do(ctx, Input{Kind: FindOrder, Key: o.ID, Order: o}, http.MethodGet, "/orders/find/"+o.ID, &b,
		func(out *Output) { out.Paid = b.Paid })
}

// setup makes an unrecorded call, retrying a call without an answer (or
// with a 5xx) every 100ms for up to a minute.
func (c *Client) setup(ctx context.Context, method, path string, out any) error {
	deadline := time.Now().Add(time.Minute)
	for {
		status, code := c.call(ctx, method, path, out)
		switch {
		case status == http.StatusOK:
			return nil
		case status != 0 && status < 500:
			return fmt.Errorf("checkouttest: %s %s: %d %s", method, path, status, code)
		case time.Now().After(deadline) || ctx.Err() != nil:
			return fmt.Errorf("checkouttest: %s %s: no answer within a minute (%d %s)", method, path, status, code)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // a client's retry pause
		}
	}
}
