package checkout

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/tenancy"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// MaxTimelineAttempts bounds the attempts a timeline lists: the newest.
const MaxTimelineAttempts = 20

// Where an attempt of a timeline was read from.
const (
	SourceRedis      = "redis"      // the saga hash (for Config.StateTTL), with every step.
	SourceClickHouse = "clickhouse" // the checkout_sagas row; no steps.
)

// Timeline is the checkout history of an order, newest attempt first.
type Timeline struct {
	OrderID  string    `json:"order_id"`
	Paid     bool      `json:"paid"`
	Attempts []Attempt `json:"attempts"`
}

// Attempt is one checkout attempt: its start, steps and answer.
type Attempt struct {
	TrNum     int64  `json:"tr_num"`
	Source    string `json:"source"`
	UserID    string `json:"user_id"`
	TotalCost int64  `json:"total_cost"`
	// Status is pending, compensating, succeeded or failed (see Reason).
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// TraceID is the attempt's trace.
	TraceID    string     `json:"trace_id,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	DecidedAt  *time.Time `json:"decided_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Parts and Compensated count the participants and the effects undone.
	Parts       int `json:"parts"`
	Compensated int `json:"compensated"`
	// CancelRequestedAt and CancelRequestedBy are Flow.Cancel's (SourceRedis only).
	CancelRequestedAt *time.Time `json:"cancel_requested_at,omitempty"`
	CancelRequestedBy string     `json:"cancel_requested_by,omitempty"`
	// Steps are the participants (Source redis only).
	Steps []Step `json:"steps,omitempty"`
}

// Step is one participant of an attempt: the command it was sent, its
// outcome ("ok", "fail:<reason>", "abandoned", "cancelled"; empty while it has not
// answered) and, when the attempt compensated it, the compensation's.
type Step struct {
	Part          string     `json:"part"`
	Request       Command    `json:"request"`
	Result        string     `json:"result,omitempty"`
	AnsweredAt    *time.Time `json:"answered_at,omitempty"`
	Compensation  string     `json:"compensation,omitempty"`
	CompensatedAt *time.Time `json:"compensated_at,omitempty"`
}

// Timeline returns an order's newest MaxTimelineAttempts attempts, from
// Redis then (WithHistory) ClickHouse. ErrNotFound for an unknown order.
func (s *Flow) Timeline(ctx context.Context, orderID string) (Timeline, error) {
	o, saga1, err := s.orderAndFirstSaga(ctx, orderID)
	if err != nil {
		return Timeline{}, err
	}
	tl := Timeline{OrderID: orderID, Paid: o.Paid, Attempts: []Attempt{}}
	first := max(1, o.TrNum-MaxTimelineAttempts+1)
	pipe := s.rdb.Pipeline()
	cmds := map[int64]*redis.MapStringStringCmd{}
	for tr := o.TrNum; tr >= max(first, 2); tr-- { // the first is read with the order
		cmds[tr] = pipe.HGetAll(ctx, s.keys.Saga(orderID, tr))
	}
	if len(cmds) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return Timeline{}, fmt.Errorf("checkout: timeline of %s: %w", orderID, err)
		}
	}
	var cold []int64
	for tr := o.TrNum; tr >= first; tr-- {
		h := saga1
		if tr > 1 {
			h = cmds[tr].Val()
		}
		if len(h) == 0 {
			cold = append(cold, tr)
			continue
		}
		tl.Attempts = append(tl.Attempts, attemptOf(tr, h))
	}
	if len(cold) > 0 && s.ch != nil {
		old, err := coldAttempts(ctx, s.ch, orderID, cold)
		if err != nil {
			return Timeline{}, err
		}
		tl.Attempts = append(tl.Attempts, old...)
	}
	return tl, nil
}

// orderAndFirstSaga is FindOrder that also reads attempt 1's saga hash in
// one round trip: the whole timeline of most orders.
func (s *Flow) orderAndFirstSaga(ctx context.Context, orderID string) (Order, map[string]string, error) {
	if err := checkID("order", orderID); err != nil {
		return Order{}, nil, err
	}
	var order, saga *redis.MapStringStringCmd
	err := s.store.retryErr(ctx, func() error {
		_, err := s.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			order, saga = pipe.HGetAll(ctx, s.keys.Order(orderID)), pipe.HGetAll(ctx, s.keys.Saga(orderID, 1))
			return nil
		})
		return err
	})
	if err != nil {
		return Order{}, nil, fmt.Errorf("checkout: find order: %w", err)
	}
	o, err := orderOf(orderID, order.Val())
	return o, saga.Val(), err
}

// attemptOf reads a saga hash.
func attemptOf(tr int64, h map[string]string) Attempt {
	a := Attempt{TrNum: tr, Source: SourceRedis, UserID: h["user"], Status: h["status"], Reason: h["reason"],
		TraceID: flow.TraceIDOf(h["tp"]), StartedAt: msTime(h["started_ms"]), DecidedAt: msTime(h["decided_ms"]),
		FinishedAt: msTime(h["finished_ms"]), CancelRequestedAt: msTime(h["cancel_ms"]), CancelRequestedBy: h["cancel_by"]}
	a.TotalCost, _ = strconv.ParseInt(h["total"], 10, 64)
	for _, part := range strings.Split(h["parts"], ",") {
		if part == "" {
			continue
		}
		st := Step{Part: part, Result: h["r:"+part], AnsweredAt: msTime(h["rt:"+part]), Compensation: h["c:"+part],
			CompensatedAt: msTime(h["ct:"+part])}
		_ = json.Unmarshal([]byte(h["cmd:"+part]), &st.Request)
		if st.Compensation == "ok" {
			a.Compensated++
		}
		a.Steps = append(a.Steps, st)
	}
	a.Parts = len(a.Steps)
	return a
}

// coldAttempts reads an order's attempts from checkout_sagas, newest first.
func coldAttempts(ctx context.Context, ch *clickhouse.Client, orderID string, trs []int64) ([]Attempt, error) {
	nums := make([]string, len(trs))
	for i, tr := range trs {
		nums[i] = strconv.FormatInt(tr, 10)
	}
	// The tr_num list is built from integers; the order id is bound.
	out, err := clickhouse.QueryRows(ctx, ch, "timeline of "+orderID, `SELECT tr_num, user_id, status, reason, total_cost, parts, compensated,
		toUInt64(started_at) * 1000 + started_at_ms, toUInt64(finished_at) * 1000 + finished_at_ms, decide_ms, trace_id
		FROM `+clickhouse.TableCheckoutSagas+` FINAL WHERE order_id = ? AND tr_num IN (`+strings.Join(nums, ",")+`)
		ORDER BY tr_num DESC`, []any{orderID}, func(rows driver.Rows) (Attempt, error) {
		var tr uint32
		var parts, comp uint16
		var started, finished uint64
		var decide uint32
		a := Attempt{Source: SourceClickHouse}
		err := rows.Scan(&tr, &a.UserID, &a.Status, &a.Reason, &a.TotalCost, &parts, &comp, &started, &finished, &decide, &a.TraceID)
		a.TrNum, a.Parts, a.Compensated = int64(tr), int(parts), int(comp)
		st, fin, dec := time.UnixMilli(int64(started)).UTC(), time.UnixMilli(int64(finished)).UTC(), time.UnixMilli(int64(started)+int64(decide)).UTC()
		a.StartedAt, a.FinishedAt, a.DecidedAt = &st, &fin, &dec
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	return out, nil
}

func msTime(v string) *time.Time {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return nil
	}
	t := time.UnixMilli(n).UTC()
	return &t
}

// events lists the newest finished attempts in the sagas stream (Description.Events).
func (s *Flow) events(ctx context.Context, v tenancy.View, limit int) ([]flow.Event, error) {
	sagas, err := flow.Recent(ctx, s.rdb, s.topics.Sagas, flow.ScanFor(v, limit))
	if err != nil {
		return nil, err
	}
	var out []flow.Event
	for _, e := range sagas {
		var sg Saga
		if e.Type != TypeSaga || json.Unmarshal(e.Payload, &sg) != nil || !Sees(v, sg.OrderID) {
			continue
		}
		summary := fmt.Sprintf("%s, total %d", sg.Status, sg.TotalCost)
		if sg.Reason != "" {
			summary += ": " + sg.Reason
		}
		if sg.Compensated > 0 {
			summary += fmt.Sprintf(" (%d parts undone)", sg.Compensated)
		}
		at := e.Time()
		if sg.FinishedMs > 0 {
			at = time.UnixMilli(sg.FinishedMs)
		}
		out = append(out, flow.Event{Kind: "checkout", ID: attemptKey(sg.OrderID, sg.TrNum), Time: at,
			Subject: "order " + sg.OrderID + " by user " + sg.UserID, Summary: summary,
			Cause: []flow.Ref{{Kind: "order", ID: sg.OrderID}}, TraceID: flow.TraceIDOf(sg.TraceParent),
			Steps: sagaSteps(sg.Steps)})
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// attemptKey names one attempt of an order.
func attemptKey(orderID string, tr int64) string { return orderID + "#" + strconv.FormatInt(tr, 10) }

// sagaSteps lists the parts' answers, then their compensations.
func sagaSteps(steps []SagaStep) []flow.Step {
	var out, undo []flow.Step
	for _, st := range steps {
		out = append(out, flow.Step{Name: st.Part, OK: st.Result == "ok", Result: st.Result})
		if st.Undo != "" {
			undo = append(undo, flow.Step{Name: "undo " + st.Part, OK: st.Undo == "ok" || st.Undo == "noop", Result: st.Undo})
		}
	}
	return append(out, undo...)
}

// HistoryConfig configures the "checkout-analytics" stage, appending saga
// records to checkout_sagas; rows collapse by (order_id, tr_num).
func (s *Flow) HistoryConfig() sink.HistoryConfig[clickhouse.CheckoutSagaRow] {
	return sink.HistoryConfig[clickhouse.CheckoutSagaRow]{Stage: StageHistory, Topic: s.topics.Sagas,
		Tables: []string{clickhouse.TableCheckoutSagas},
		Rows:   sagaRows, Insert: clickhouse.InsertCheckoutSagas, Runner: s.cfg.Stage}
}

// sagaRows turns a saga record into its row; malformed is stream.Permanent.
func sagaRows(m *stream.Message) ([]clickhouse.CheckoutSagaRow, error) {
	if m.Type != TypeSaga {
		return nil, stream.Permanentf("checkout: message type %q, want %q", m.Type, TypeSaga)
	}
	var r Saga
	if err := json.Unmarshal(m.Payload, &r); err != nil || !ValidID(r.OrderID) || r.TrNum < 1 || r.TrNum > 1<<32-1 {
		return nil, stream.Permanentf("checkout: malformed saga record %q: %v", m.Payload, err)
	}
	return []clickhouse.CheckoutSagaRow{{OrderID: r.OrderID, TrNum: uint32(r.TrNum), UserID: r.UserID, Status: r.Status,
		Reason: r.Reason, TotalCost: r.TotalCost, Parts: uint16(min(max(r.Parts, 0), 1<<16-1)),
		Compensated: uint16(min(max(r.Compensated, 0), 1<<16-1)),
		StartedAt:   time.UnixMilli(r.StartedMs), FinishedAt: time.UnixMilli(r.FinishedMs),
		Decide: time.Duration(max(r.DecidedMs-r.StartedMs, 0)) * time.Millisecond, Duration: time.Duration(max(r.FinishedMs-r.StartedMs, 0)) * time.Millisecond,
		TraceID: flow.TraceIDOf(r.TraceParent)}}, nil
}
