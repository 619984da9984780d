package collector

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/dropstream/dropstream/avail"
	"github.com/dropstream/dropstream/collector/provider"
	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/stream"
)

// NormalizerStage is the name (and default consumer group) of the
// normalizer stage.
const NormalizerStage = "avail-normalizer"

// maxRawRunPayload bounds a raw run message: the body, base64-encoded in
// JSON, plus room for the other fields.
const maxRawRunPayload = avail.MaxRawBodySize/3*4 + 8 + 64<<10

// NewNormalizer returns the "avail-normalizer" stage: one avail.Snapshot
// per raw run to topics.Snapshots. Invalid runs are dead-lettered; a
// publish failure is retried.
func NewNormalizer(topics avail.Topics, pub *stream.Publisher) stream.Stage {
	return stream.Stage{
		Name:  NormalizerStage,
		Topic: topics.Raw,
		Handler: func(ctx context.Context, m *stream.Message) error {
			snap, err := normalizeMessage(m)
			if err != nil {
				return stream.Permanent(err)
			}
			payload, err := json.Marshal(snap)
			if err != nil {
				return stream.Permanentf("encode snapshot of run %s: %w", snap.RunID, err)
			}
			out := stream.NewMessage(snap.ScopeKey, avail.TypeSnapshot, payload)
			out.SetContext(ctx)
			return pub.Publish(ctx, topics.Snapshots, out)
		},
	}
}

// normalizeMessage decodes a raw-run message and normalizes it.
func normalizeMessage(m *stream.Message) (avail.Snapshot, error) {
	if m.Type != avail.TypeRawRun {
		return avail.Snapshot{}, fmt.Errorf("message type %q, want %q", clip.Marked(m.Type, maxQuoted), avail.TypeRawRun)
	}
	if len(m.Payload) > maxRawRunPayload {
		return avail.Snapshot{}, fmt.Errorf("raw run of %d bytes exceeds %d", len(m.Payload), maxRawRunPayload)
	}
	var run avail.RawRun
	dec := json.NewDecoder(bytes.NewReader(m.Payload))
	if err := dec.Decode(&run); err != nil {
		return avail.Snapshot{}, fmt.Errorf("decode raw run: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return avail.Snapshot{}, errors.New("decode raw run: data after the JSON object")
	}
	if run.ScopeKey != m.Key {
		return avail.Snapshot{}, fmt.Errorf("raw run %s: scope key %q differs from message key %q",
			clip.Marked(run.RunID, maxQuoted), clip.Marked(run.ScopeKey, maxQuoted), clip.Marked(m.Key, maxQuoted))
	}
	return Normalize(run)
}

// Normalize turns a raw run into its snapshot through the provider's
// adapter (ErrMalformed); a failed run gives OK false.
func Normalize(run avail.RawRun) (avail.Snapshot, error) {
	if err := validateRun(run); err != nil {
		return avail.Snapshot{}, err
	}
	snap := avail.Snapshot{RunID: run.RunID, SourceID: run.SourceID, Provider: run.Provider, ScopeKey: run.ScopeKey,
		RunAt: run.FinishedAt, StartedAt: run.StartedAt, Stabilization: run.Stabilization,
		NotifyFirstSight: run.NotifyFirstSight}
	if run.Status == avail.StatusFailed {
		snap.Error = run.Error
		snap.Error = cmp.Or(snap.Error, "failed run without an error")
		return snap, nil
	}
	adapter, _ := provider.For(run.Provider) // checked by validateRun
	ents, err := adapter.Parse(run.Body, run.Scope, run.RestaurantLevel)
	if err != nil {
		return avail.Snapshot{}, fmt.Errorf("normalize run %s of source %s (scope %s, HTTP %d): %w",
			run.RunID, run.SourceID, run.ScopeKey, run.HTTPStatus, err)
	}
	snap.OK, snap.Entities = true, ents
	return snap, nil
}

// validateRun checks the fields of a raw run that later stages rely on.
func validateRun(run avail.RawRun) error {
	var errs []error
	if run.RunID == "" || len(run.RunID) > avail.MaxIDLen {
		errs = append(errs, fmt.Errorf("run id %q: want 1-%d bytes", clip.Marked(run.RunID, maxQuoted), avail.MaxIDLen))
	}
	if !validID(run.SourceID) {
		errs = append(errs, fmt.Errorf("source id %q: want 1-64 characters of [a-z0-9_-]", clip.Marked(run.SourceID, maxQuoted)))
	}
	if err := run.Scope.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("scope: %w", err))
	} else if run.ScopeKey != run.Scope.Key(run.SourceID) {
		errs = append(errs, fmt.Errorf("scope key %q is not the key of the run's source and scope", clip.Marked(run.ScopeKey, maxQuoted)))
	}
	if _, err := provider.For(run.Provider); err != nil {
		errs = append(errs, err)
	}
	if run.Status != avail.StatusOK && run.Status != avail.StatusFailed {
		errs = append(errs, fmt.Errorf("status %q: want %q or %q", clip.Marked(run.Status, maxQuoted), avail.StatusOK, avail.StatusFailed))
	}
	if len(run.Error) > 4096 {
		errs = append(errs, errors.New("error longer than 4096 bytes"))
	}
	errs = bounds.Check(errs, "stabilization", run.Stabilization, 0, MaxStabilization)
	if run.FinishedAt.IsZero() {
		errs = append(errs, errors.New("finished_at is missing"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid raw run: %w", errors.Join(errs...))
	}
	return nil
}
