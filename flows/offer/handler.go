package offer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/stream"
)

// appendChunk is how many matches one append script writes (three
// arguments each, well under Lua's unpack limit).
const appendChunk = 500

// handler evaluates a fan-out message over the handler's offers and writes
// the matches in generation-checked scripts.
func (s *Flow) handler(tag string, kind Kind) stream.Handler {
	v := s.views[tag]
	return func(ctx context.Context, m *stream.Message) error {
		var p evalPayload
		dec := json.NewDecoder(bytes.NewReader(m.Payload))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return stream.Permanentf("decode fan-out message: %w", err)
		}
		if !validResultID(p.ResultID) || p.UniqueRequestID == "" {
			return stream.Permanentf("fan-out message without a result id or unique request id")
		}
		var filter Element
		fd := json.NewDecoder(bytes.NewReader(p.Filter))
		fd.DisallowUnknownFields()
		if err := fd.Decode(&filter); err != nil {
			return stream.Permanentf("decode filter of %s: %w", p.ResultID, err)
		}
		if err := filter.Validate(); err != nil {
			return stream.Permanent(err)
		}
		prog := compile(filter)
		s.usePriceCache(ctx, v, p.ResultID, &prog)
		matches, _, err := v.evaluate(ctx, &prog, kind)
		if err != nil {
			return err
		}
		return s.answer(ctx, tag, p, matches)
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
