package offer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/stream"
)

// view is a handler's in-memory copy of its offers, synced through its
// version counter and change stream (reloaded when trimmed past it).
type view struct {
	rdb     redis.UniversalClient
	handler string

	mu        sync.Mutex
	loaded    bool
	version   int64
	lastID    string
	offers    []*Offer
	pos       map[string]int
	byProduct map[string]map[string]*Offer // product id → offer id → offer
}

// maxChangesPerRead bounds one XRANGE of the change stream.
const maxChangesPerRead = 10000

// sync brings the view up to date; the caller holds v.mu.
func (v *view) sync(ctx context.Context) error {
	for range 100 {
		cur, err := v.rdb.Get(ctx, versionKey(v.handler)).Int64()
		if errors.Is(err, redis.Nil) {
			cur, err = 0, nil
		}
		if err != nil {
			return fmt.Errorf("offer view %s: version: %w", v.handler, err)
		}
		if !v.loaded {
			return v.reload(ctx)
		}
		if cur == v.version {
			return nil
		}
		xs, err := v.rdb.XRangeN(ctx, changesKey(v.handler), v.lastID, "+", maxChangesPerRead+1).Result()
		if err != nil {
			return fmt.Errorf("offer view %s: changes: %w", v.handler, err)
		}
		if len(xs) > 0 && xs[0].ID == v.lastID {
			xs = xs[1:]
		}
		if len(xs) == 0 || changeVersion(xs[0]) != v.version+1 {
			return v.reload(ctx) // trimmed past our position
		}
		if err := v.apply(ctx, xs); err != nil {
			return err
		}
	}
	return nil
}

func changeVersion(x redis.XMessage) int64 {
	n, _ := strconv.ParseInt(str(x.Values["v"]), 10, 64)
	return n
}

// apply applies changes in order, reading the current body of each offer.
func (v *view) apply(ctx context.Context, xs []redis.XMessage) error {
	ids := make([]string, 0, len(xs))
	for _, x := range xs {
		if id, _ := x.Values["id"].(string); id != "" {
			ids = append(ids, id)
		}
	}
	offers, err := recordstore.InHash[Offer](v.rdb, offersKey(v.handler)).GetMany(ctx, ids)
	if err != nil {
		return fmt.Errorf("offer view %s: read changed offers: %w", v.handler, err)
	}
	current := make(map[string]bool, len(offers))
	for i := range offers {
		current[offers[i].ID] = true
		v.put(&offers[i])
	}
	for _, id := range ids {
		if !current[id] {
			v.remove(id)
		}
	}
	last := xs[len(xs)-1]
	v.version, v.lastID = changeVersion(last), last.ID
	return nil
}

func (v *view) put(o *Offer) {
	if i, ok := v.pos[o.ID]; ok {
		v.unindex(v.offers[i])
		v.offers[i] = o
	} else {
		v.pos[o.ID] = len(v.offers)
		v.offers = append(v.offers, o)
	}
	v.index(o)
}

func (v *view) index(o *Offer) {
	m := v.byProduct[o.ProductID]
	if m == nil {
		m = map[string]*Offer{}
		v.byProduct[o.ProductID] = m
	}
	m[o.ID] = o
}

func (v *view) unindex(o *Offer) {
	if m := v.byProduct[o.ProductID]; m != nil {
		delete(m, o.ID)
		if len(m) == 0 {
			delete(v.byProduct, o.ProductID)
		}
	}
}

func (v *view) remove(id string) {
	i, ok := v.pos[id]
	if !ok {
		return
	}
	v.unindex(v.offers[i])
	last := len(v.offers) - 1
	v.offers[i] = v.offers[last]
	v.pos[v.offers[i].ID] = i
	v.offers = v.offers[:last]
	delete(v.pos, id)
}

// reload reads every offer of the handler, after the version and the last
// change, so the next sync applies again what changed during the scan.
func (v *view) reload(ctx context.Context) error {
	tx := v.rdb.TxPipeline()
	ver := tx.Get(ctx, versionKey(v.handler))
	last := tx.XRevRangeN(ctx, changesKey(v.handler), "+", "-", 1)
	_, _ = tx.Exec(ctx)
	version, err := ver.Int64()
	if errors.Is(err, redis.Nil) {
		version, err = 0, nil
	}
	if err != nil {
		return fmt.Errorf("offer view %s: version: %w", v.handler, err)
	}
	if err := last.Err(); err != nil {
		return fmt.Errorf("offer view %s: last change: %w", v.handler, err)
	}
	lastID := "0-0"
	if xs := last.Val(); len(xs) > 0 {
		lastID = xs[0].ID
	}
	offers := make([]*Offer, 0, len(v.offers))
	pos := make(map[string]int, len(v.offers))
	it := v.rdb.HScan(ctx, offersKey(v.handler), 0, "", 1000).Iterator()
	for it.Next(ctx) {
		id := it.Val()
		it.Next(ctx) // its value
		if _, dup := pos[id]; dup {
			continue // HSCAN may return an entry twice
		}
		o := new(Offer)
		if err := json.Unmarshal([]byte(it.Val()), o); err != nil {
			return fmt.Errorf("offer view %s: decode %s: %w", v.handler, id, err)
		}
		pos[o.ID] = len(offers)
		offers = append(offers, o)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("offer view %s: scan: %w", v.handler, err)
	}
	v.offers, v.pos, v.version, v.lastID, v.loaded = offers, pos, version, lastID, true
	v.byProduct = make(map[string]map[string]*Offer, len(v.byProduct))
	for _, o := range offers {
		v.index(o)
	}
	return nil
}

// holds syncs the view and reports whether it holds offer id (false: sync failed).
func (v *view) holds(ctx context.Context, id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.sync(ctx) != nil {
		return false
	}
	_, ok := v.pos[id]
	return ok
}

// scored is a match with its ordering score.
type scored struct {
	match Match
	score float64
}

// evaluate syncs the view and runs the program over every offer.
func (v *view) evaluate(ctx context.Context, p *program, kind Kind) ([]scored, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.sync(ctx); err != nil {
		return nil, err
	}
	var out []scored
	if p.products != nil {
		for _, id := range p.products {
			for _, o := range v.byProduct[id] {
				if m, s, ok := p.eval(o, kind); ok {
					out = append(out, scored{m, s})
				}
			}
		}
		return out, nil
	}
	for _, o := range v.offers {
		if m, s, ok := p.eval(o, kind); ok {
			out = append(out, scored{m, s})
		}
	}
	return out, nil
}

// appendChunk is how many matches one append script writes (three
// arguments each, well under Lua's unpack limit).
const appendChunk = 500

// handler evaluates a fan-out message over the handler's offers and writes
// the matches in generation-checked scripts.
func (s *Flow) handler(tag string, kind Kind) stream.Handler {
	v := s.views[tag]
	return func(ctx context.Context, m *stream.Message) error {
		var p struct {
			evalPayload
			Filter Element `json:"filter"` // decoded, unlike evalPayload's
		}
		dec := json.NewDecoder(bytes.NewReader(m.Payload))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return stream.Permanentf("decode fan-out message: %w", err)
		}
		if !validResultID(p.ResultID) || p.UniqueRequestID == "" {
			return stream.Permanentf("fan-out message without a result id or unique request id")
		}
		if err := p.Filter.Validate(); err != nil {
			return stream.Permanent(err)
		}
		prog := compile(p.Filter)
		s.usePriceCache(ctx, v, p.ResultID, &prog)
		matches, err := v.evaluate(ctx, &prog, kind)
		if err != nil {
			return err
		}
		return s.answer(ctx, tag, p.evalPayload, matches)
	}
}

// answer writes one handler's matches and removes it from the waiting set.
func (s *Flow) answer(ctx context.Context, tag string, p evalPayload, matches []scored) error {
	keys := s.cfg.resultKeys(p.ResultID)
	pipe := s.rdb.Pipeline()
	for start := 0; start < len(matches); start += appendChunk {
		part := matches[start:min(start+appendChunk, len(matches))]
		args := make([]any, 0, 2+3*len(part))
		args = append(args, p.UniqueRequestID, tag)
		for _, sm := range part {
			args = append(args, sm.match.OfferID, strconv.FormatFloat(sm.score, 'g', -1, 64), encodeMatch(sm.match))
		}
		appendScript.EvalSha(ctx, pipe, []string{keys.main, keys.data, keys.values, keys.waiting}, args...)
	}
	now := s.cfg.Now()
	fin := finishScript.EvalSha(ctx, pipe, append(keys.all(), keys.live), p.UniqueRequestID, tag, now.UnixMilli(),
		s.cfg.ResultTTL.Milliseconds(), s.cfg.ResultGrace.Milliseconds(), p.ResultID)
	if _, err := pipe.Exec(ctx); err != nil {
		if script.IsNoScript(err) {
			return fmt.Errorf("offer: answer %s: %w", p.ResultID, errors.Join(err, loadScripts(ctx, s.rdb)))
		}
		return fmt.Errorf("offer: answer %s: %w", p.ResultID, err)
	}
	reply, _ := fin.Val().([]any)
	if len(reply) != 2 {
		return fmt.Errorf("offer: answer %s: unexpected reply %v", p.ResultID, fin.Val())
	}
	outcome, _ := reply[0].(string)
	s.met.answers.Add(ctx, 1, metric.WithAttributes(keyHandler.String(tag), keyOutcome.String(outcome)))
	if outcome == "complete" {
		started, _ := strconv.ParseInt(fmt.Sprint(reply[1]), 10, 64)
		if started > 0 {
			s.met.fanout.Record(ctx, max(0, now.Sub(time.UnixMilli(started)).Seconds()))
		}
	}
	return nil
}
