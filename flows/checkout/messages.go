package checkout

import (
	"fmt"
	"strconv"
	"strings"
)

// Command types: "sub"/"add" on the stock topic,
// "pay"/"can" on the payment topic. "add" and "can" are compensations.
const (
	CmdSubtract = "sub"
	CmdAdd      = "add"
	CmdPay      = "pay"
	CmdCancel   = "can"
)

// Saga statuses (saga and order hashes, sagas stream, ClickHouse).
const (
	StatusPending      = "pending"
	StatusCompensating = "compensating"
	StatusSucceeded    = "succeeded"
	StatusFailed       = "failed"
)

// Results of a part that never answered: given up (ResultAbandoned) or
// cancelled by an operator; both compensate it.
const (
	ResultAbandoned = "abandoned"
	ResultCancelled = "cancelled"
)

// Line is an item and a quantity.
type Line struct {
	ID     string `json:"id"`
	Amount int64  `json:"amnt"`
}

// Command is a stock or payment command of one attempt. Part is "pay", or
// "stock.<p>" for the order's items in stock partition p. Nonce is drawn
// when the attempt begins: it tells the attempt from one of the same
// number that a Redis failover lost, whose commands may still arrive.
type Command struct {
	OrderID string `json:"order_id"`
	TrNum   int64  `json:"tr_num"`
	Nonce   string `json:"nonce,omitempty"`
	Type    string `json:"type"`
	Part    string `json:"part"`
	UserID  string `json:"user_id,omitempty"`
	Amount  int64  `json:"amnt,omitempty"`
	Items   []Line `json:"items,omitempty"`
}

// Rollback reports whether the command is a compensation.
func (c Command) Rollback() bool { return c.Type == CmdAdd || c.Type == CmdCancel }

// Payment reports whether the command is the payment stage's.
func (c Command) Payment() bool { return c.Type == CmdPay || c.Type == CmdCancel }

// Compensation returns the command that undoes c.
func (c Command) Compensation() Command {
	out := c
	switch c.Type {
	case CmdSubtract:
		out.Type = CmdAdd
	case CmdPay:
		out.Type = CmdCancel
	}
	return out
}

// Saga is a finished attempt's record (sagas topic, checkout_sagas).
type Saga struct {
	OrderID     string `json:"order_id"`
	TrNum       int64  `json:"tr_num"`
	UserID      string `json:"user_id"`
	Status      string `json:"status"`
	Reason      string `json:"reason"`
	TotalCost   int64  `json:"total_cost"`
	Parts       int    `json:"parts"`
	Compensated int    `json:"compensated"`
	StartedMs   int64  `json:"started_ms"`
	DecidedMs   int64  `json:"decided_ms"`
	FinishedMs  int64  `json:"finished_ms"`
	TraceParent string `json:"traceparent"`
	// Steps are the parts' answers, in the order of the saga's parts.
	Steps []SagaStep `json:"steps,omitempty"`
}

// SagaStep is one part's answer in a finished attempt: the result of its
// command ("ok", "fail:<reason>", "abandoned", "cancelled") and, when it
// was compensated, the result of its compensation ("ok", "noop").
type SagaStep struct {
	Part   string `json:"part"`
	Result string `json:"result"`
	Undo   string `json:"undo,omitempty"`
}

// Limits on outside input: an id's length (ids are [A-Za-z0-9_-]), an
// order's item lines, a line's quantity, an item's price, a batch_init's
// n, n_items and n_users. MaxAmount bounds stock, credit and one change of
// either, so sums stay exact in Lua's doubles (below 2^53).
const (
	MaxIDLen    = 64
	MaxLines    = 100
	MaxQuantity = 10_000
	MaxPrice    = 1_000_000_000
	MaxAmount   = 1_000_000_000_000_000
	MaxBatch    = 100_000
)

// ValidID reports whether s is a well-formed id.
func ValidID(s string) bool {
	return len(s) > 0 && len(s) <= MaxIDLen && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == ""
}

// ParseLines parses the order hash's items field, "id:qty,id:qty".
func ParseLines(s string) ([]Line, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	out := make([]Line, 0, len(parts))
	for _, p := range parts {
		id, qty, ok := strings.Cut(p, ":")
		n, err := strconv.ParseInt(qty, 10, 64)
		if !ok || err != nil || !ValidID(id) {
			return nil, fmt.Errorf("checkout: malformed item line %q", p)
		}
		out = append(out, Line{ID: id, Amount: n})
	}
	return out, nil
}
