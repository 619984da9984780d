package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/rediskey"
)

// SourcesKey is the Redis hash of sources: source id → source JSON.
const SourcesKey = rediskey.Prefix + "sources"

// Store limits.
const (
	// MaxSources bounds the sources of a Store and of a file.
	MaxSources = 10000
	// MaxSourceSize bounds one source's JSON.
	MaxSourceSize = 1 << 20
	// MaxSourcesFileSize bounds a file read by LoadFile.
	MaxSourcesFileSize = 16 << 20
)

// Store keeps sources in the Redis hash SourcesKey, so the API and the
// scheduler share them. Sources are stored with defaults applied. The
// auth token is stored in clear: protect the Redis like any secret store.
type Store struct {
	rdb redis.UniversalClient
}

// NewStore returns a store over rdb.
func NewStore(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

// Put validates src and creates or replaces it, with defaults applied. An
// invalid source returns an error wrapping ErrInvalidSource; a new source
// beyond MaxSources is refused.
func (s *Store) Put(ctx context.Context, src Source) error {
	if err := src.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(src.WithDefaults())
	if err != nil {
		return fmt.Errorf("encode source %s: %w", src.ID, err)
	}
	if len(b) > MaxSourceSize {
		return fmt.Errorf("%w %q: %d bytes of JSON exceed %d", ErrInvalidSource, src.ID, len(b), MaxSourceSize)
	}
	n, err := s.rdb.HLen(ctx, SourcesKey).Result()
	if err != nil {
		return fmt.Errorf("put source %s: %w", src.ID, err)
	}
	if n >= MaxSources {
		exists, err := s.rdb.HExists(ctx, SourcesKey, src.ID).Result()
		if err != nil {
			return fmt.Errorf("put source %s: %w", src.ID, err)
		}
		if !exists {
			return fmt.Errorf("%w %q: the store already holds %d sources", ErrInvalidSource, src.ID, MaxSources)
		}
	}
	if err := s.rdb.HSet(ctx, SourcesKey, src.ID, b).Err(); err != nil {
		return fmt.Errorf("put source %s: %w", src.ID, err)
	}
	return nil
}

// Get returns a source, or an error wrapping ErrSourceNotFound.
func (s *Store) Get(ctx context.Context, id string) (Source, error) {
	b, err := s.rdb.HGet(ctx, SourcesKey, id).Bytes()
	if errors.Is(err, redis.Nil) {
		return Source{}, fmt.Errorf("%w: %q", ErrSourceNotFound, clip.Marked(id, maxQuoted))
	}
	if err != nil {
		return Source{}, fmt.Errorf("get source %s: %w", clip.Marked(id, maxQuoted), err)
	}
	return decodeStored(id, b)
}

// List returns every readable source, sorted by id. Entries that cannot be
// read (corrupt JSON or invalid values written by something else) are left
// out and reported together in an error wrapping ErrInvalidSource, returned
// alongside the readable ones; a Redis failure returns no sources.
func (s *Store) List(ctx context.Context) ([]Source, error) {
	n, err := s.rdb.HLen(ctx, SourcesKey).Result()
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	if n > MaxSources {
		return nil, fmt.Errorf("list sources: %d sources exceed %d", n, MaxSources)
	}
	all, err := s.rdb.HGetAll(ctx, SourcesKey).Result()
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	out := make([]Source, 0, len(all))
	var errs []error
	for id, raw := range all {
		src, err := decodeStored(id, []byte(raw))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, src)
	}
	slices.SortFunc(out, func(a, b Source) int { return strings.Compare(a.ID, b.ID) })
	return out, errors.Join(errs...)
}

// Delete removes a source, or returns an error wrapping ErrSourceNotFound.
func (s *Store) Delete(ctx context.Context, id string) error {
	n, err := s.rdb.HDel(ctx, SourcesKey, id).Result()
	if err != nil {
		return fmt.Errorf("delete source %s: %w", clip.Marked(id, maxQuoted), err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q", ErrSourceNotFound, clip.Marked(id, maxQuoted))
	}
	return s.deleteHealth(ctx, id)
}

// decodeStored decodes and validates one stored source.
func decodeStored(id string, b []byte) (Source, error) {
	if len(b) > MaxSourceSize {
		return Source{}, fmt.Errorf("%w %q: stored JSON of %d bytes exceeds %d", ErrInvalidSource, clip.Marked(id, maxQuoted), len(b), MaxSourceSize)
	}
	var src Source
	if err := json.Unmarshal(b, &src); err != nil {
		if !errors.Is(err, ErrInvalidSource) {
			err = fmt.Errorf("%w: %w", ErrInvalidSource, err)
		}
		return Source{}, fmt.Errorf("stored source %q: %w", clip.Marked(id, maxQuoted), err)
	}
	if src.ID != id {
		return Source{}, fmt.Errorf("%w: stored under %q but has id %q", ErrInvalidSource, clip.Marked(id, maxQuoted), clip.Marked(src.ID, maxQuoted))
	}
	if err := src.Validate(); err != nil {
		return Source{}, err
	}
	return src.WithDefaults(), nil
}

// LoadFile reads a JSON array of sources (at most MaxSourcesFileSize bytes
// and MaxSources sources), decoded strictly (unknown fields are errors),
// each validated, ids unique. It returns them with defaults applied, in file
// order.
func LoadFile(path string) ([]Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load sources: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSourcesFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("load sources from %s: %w", path, err)
	}
	if len(b) > MaxSourcesFileSize {
		return nil, fmt.Errorf("load sources from %s: file exceeds %d bytes", path, MaxSourcesFileSize)
	}
	srcs, err := ParseSources(b)
	if err != nil {
		return nil, fmt.Errorf("load sources from %s: %w", path, err)
	}
	return srcs, nil
}

// ParseSources decodes a JSON array of sources as LoadFile does.
func ParseSources(b []byte) ([]Source, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var raw []json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: want a JSON array of sources: %w", ErrInvalidSource, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the array of sources", ErrInvalidSource)
	}
	if len(raw) > MaxSources {
		return nil, fmt.Errorf("%w: %d sources exceed %d", ErrInvalidSource, len(raw), MaxSources)
	}
	out := make([]Source, 0, len(raw))
	seen := make(map[string]bool, len(raw))
	for i, r := range raw {
		var src Source
		if err := json.Unmarshal(r, &src); err != nil {
			return nil, fmt.Errorf("source %d: %w", i, err)
		}
		if err := src.Validate(); err != nil {
			return nil, fmt.Errorf("source %d: %w", i, err)
		}
		if seen[src.ID] {
			return nil, fmt.Errorf("%w: source %d: id %q is used twice", ErrInvalidSource, i, src.ID)
		}
		seen[src.ID] = true
		out = append(out, src.WithDefaults())
	}
	return out, nil
}
