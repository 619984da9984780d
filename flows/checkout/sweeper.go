package checkout

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// sweepPage bounds the stale attempts one sweep takes per partition.
const sweepPage = 500

// SweepStats counts what one sweep did.
type SweepStats struct {
	// Stale counts open attempts older than Config.SweepAge.
	Stale int
	// Resent counts commands and compensations sent again.
	Resent int
	// Abandoned is the number of parts given up after Config.AbandonAge.
	Abandoned int
	// Closed counts index entries of finished or expired attempts dropped.
	Closed int
}

// Sweep drives every attempt open longer than Config.SweepAge towards a
// final status, for messages lost on the way:
//
//   - a pending attempt younger than Config.AbandonAge gets the commands of
//     its silent parts again (idempotent by the ledger);
//   - an older one has its silent parts recorded "abandoned", so it
//     compensates them and fails;
//   - a compensating attempt gets its unconfirmed compensations again.
//
// A resent attempt waits another SweepAge. Concurrent sweeps are harmless.
func (s *Flow) Sweep(ctx context.Context, now time.Time) (SweepStats, error) {
	var st SweepStats
	cutoff := strconv.FormatInt(now.Add(-s.cfg.SweepAge).UnixMilli(), 10)
	pipe := s.rdb.Pipeline()
	ranges := make([]*redis.StringSliceCmd, s.cfg.Partitions)
	for p := range s.cfg.Partitions {
		ranges[p] = pipe.ZRangeByScore(ctx, s.keys.Open(p), &redis.ZRangeBy{Min: "-inf", Max: cutoff, Count: sweepPage})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return st, fmt.Errorf("checkout: sweep: list open attempts: %w", err)
	}
	type attempt struct {
		order string
		tr    int64
		p     int
		saga  *redis.MapStringStringCmd
	}
	var open []attempt
	pipe = s.rdb.Pipeline()
	for p, r := range ranges {
		for _, m := range r.Val() {
			order, trs, _ := strings.Cut(m, "|")
			tr, err := strconv.ParseInt(trs, 10, 64)
			if err != nil || !ValidID(order) {
				pipe.ZRem(ctx, s.keys.Open(p), m)
				st.Closed++
				continue
			}
			open = append(open, attempt{order, tr, p, pipe.HGetAll(ctx, s.keys.Saga(order, tr))})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return st, fmt.Errorf("checkout: sweep: read sagas: %w", err)
	}
	st.Stale = len(open)
	nowMs := now.UnixMilli()
	var sends []send
	var recs []outcomeRec
	var callCtx []context.Context
	pipe = s.rdb.Pipeline()
	for _, a := range open {
		h := a.saga.Val()
		member := a.order + "|" + strconv.FormatInt(a.tr, 10)
		status := h["status"]
		if status != StatusPending && status != StatusCompensating {
			pipe.ZRem(ctx, s.keys.Open(a.p), member)
			st.Closed++
			continue
		}
		started, _ := strconv.ParseInt(h["started_ms"], 10, 64)
		abandon := status == StatusPending && nowMs-started >= s.cfg.AbandonAge.Milliseconds()
		sctx, span := s.tracer.Start(remoteContext(ctx, h["tp"]), "checkout.sweep", trace.WithAttributes(
			attribute.String("checkout.order_id", a.order), attribute.Int64("checkout.tr_num", a.tr),
			attribute.String("checkout.saga_status", status), attribute.Bool("checkout.abandon", abandon)))
		span.End()
		silent, unconfirmed := openParts(h)
		if abandon {
			for _, part := range silent {
				recs = append(recs, outcomeRec{a.order, a.tr, h["nonce"], part, false, ResultAbandoned})
				callCtx = append(callCtx, sctx)
				st.Abandoned++
			}
		} else {
			resend := silent
			if status == StatusCompensating {
				resend = unconfirmed
			}
			for _, part := range resend {
				c, err := sagaCommand(h, part)
				if err != nil {
					s.log.ErrorContext(sctx, "checkout: sweep", "order_id", a.order, "tr_num", a.tr, "error", err)
					continue
				}
				if status == StatusCompensating {
					c = c.Compensation()
				}
				sends = append(sends, send{c, sctx, 0})
			}
		}
		// Not again before another SweepAge; XX keeps finished ones out.
		pipe.ZAddXX(ctx, s.keys.Open(a.p), redis.Z{Score: float64(nowMs), Member: member})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return st, fmt.Errorf("checkout: sweep: update open attempts: %w", err)
	}
	replies, rerrs := s.recordOutcomes(ctx, recs, nowMs)
	for j, res := range replies {
		if err := rerrs[j]; err != nil {
			return st, fmt.Errorf("checkout: sweep: abandon: %w", err)
		}
		if len(res) > 1 && res[0] == StatusCompensating && res[1] == "new" {
			comps, err := compensations(res)
			if err != nil {
				return st, fmt.Errorf("checkout: sweep: %w", err)
			}
			for _, c := range comps {
				sends = append(sends, send{c, callCtx[j], 0})
			}
		}
	}
	st.Resent = len(sends)
	if len(sends) > 0 || st.Abandoned > 0 {
		s.log.WarnContext(ctx, "checkout: swept stale attempts", "stale", st.Stale, "resent", st.Resent, "abandoned", st.Abandoned)
	}
	if err := s.send(ctx, sends); err != nil {
		return st, fmt.Errorf("checkout: sweep: %w", err)
	}
	return st, nil
}

// RunSweeper runs Sweep every SweepInterval and CheckConservation every
// ConservationInterval, logging failures, until ctx ends (then nil).
func (s *Flow) RunSweeper(ctx context.Context) error {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	c := time.NewTicker(s.cfg.ConservationInterval)
	defer c.Stop()
	check := func() {
		if _, err := s.CheckConservation(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "checkout: conservation check failed", "error", err)
		}
	}
	check()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.C:
			check()
		case now := <-t.C:
			if _, err := s.Sweep(ctx, now); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "checkout: sweep failed", "error", err)
			}
		}
	}
}

// remoteContext returns ctx in traceparent tp's trace.
func remoteContext(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}
