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

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/clip"
	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/internal/rediskey"
	"github.com/dropstream/dropstream/internal/tenancy"
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

// Store keeps sources, defaulted, in the Redis hash SourcesKey. Tokens are
// stored in clear: protect the Redis like a secret store.
type Store struct {
	rdb     redis.UniversalClient
	records *recordstore.Store[Source]
	decoded *lru.Cache[string, storedSource] // by id: the last source decoded
}

// storedSource is a source decoded from its stored JSON.
type storedSource struct {
	raw string
	src Source
}

// NewStore returns a store over rdb.
func NewStore(rdb redis.UniversalClient) *Store {
	decoded, _ := lru.New[string, storedSource](MaxSources) // fails only for a size below 1
	s := &Store{rdb: rdb, decoded: decoded}
	records, err := recordstore.New(rdb, recordstore.Config[Source]{Layout: recordstore.Layout{Hash: SourcesKey},
		Max: MaxSources, MaxSize: MaxSourceSize, Decode: s.decode, Tenant: func(s Source) string { return s.Tenant }})
	if err != nil {
		panic(err) // the configuration above is valid
	}
	s.records = records
	return s
}

// decode is decodeStored, once for the same stored bytes of an id.
func (s *Store) decode(id string, raw []byte) (Source, error) {
	c, ok := s.decoded.Get(id)
	if !ok || c.raw != string(raw) {
		src, err := decodeStored(id, raw)
		if err != nil {
			return Source{}, err
		}
		c = storedSource{string(raw), src}
		s.decoded.Add(id, c)
	}
	c.src.Scopes = slices.Clone(c.src.Scopes)
	return c.src, nil
}

// Put validates and stores src (ErrInvalidSource, ErrSourceTaken; at most
// MaxSources).
func (s *Store) Put(ctx context.Context, src Source) error {
	if err := src.Validate(); err != nil {
		return err
	}
	err := s.records.Put(ctx, src.ID, src.WithDefaults())
	switch {
	case errors.Is(err, recordstore.ErrTooLarge):
		return fmt.Errorf("%w %q: %w", ErrInvalidSource, src.ID, err)
	case errors.Is(err, recordstore.ErrTaken):
		return fmt.Errorf("%w: %q", ErrSourceTaken, src.ID)
	case errors.Is(err, recordstore.ErrFull):
		return fmt.Errorf("%w %q: the store already holds %d sources", ErrInvalidSource, src.ID, MaxSources)
	case err != nil:
		return fmt.Errorf("put source %s: %w", src.ID, err)
	}
	return nil
}

// Get returns a source, or an error wrapping ErrSourceNotFound.
func (s *Store) Get(ctx context.Context, id string) (Source, error) {
	return s.GetIn(ctx, tenancy.View{All: true}, id)
}

// GetIn is Get of a source v sees: another tenant's is ErrSourceNotFound.
func (s *Store) GetIn(ctx context.Context, v tenancy.View, id string) (Source, error) {
	return s.getIn(ctx, v, id, nil)
}

// GetWithHealth is GetIn and Health in one round trip.
func (s *Store) GetWithHealth(ctx context.Context, v tenancy.View, id string) (Source, SourceHealth, bool, error) {
	var health *redis.SliceCmd
	src, err := s.getIn(ctx, v, id, func(p redis.Pipeliner) { health = p.HMGet(ctx, healthKey(id), healthFields...) })
	if err != nil {
		return Source{}, SourceHealth{}, false, err
	}
	h, polled, err := healthReply(id, health)
	return src, h, polled, err
}

// getIn is GetIn with the commands queue adds in the same pipeline.
func (s *Store) getIn(ctx context.Context, v tenancy.View, id string, queue func(redis.Pipeliner)) (Source, error) {
	src, err := s.records.GetInWith(ctx, v, id, queue)
	if errors.Is(err, recordstore.ErrNotFound) {
		return Source{}, fmt.Errorf("%w: %q", ErrSourceNotFound, clip.Marked(id, maxQuoted))
	}
	return src, err
}

// List returns every readable source by id, and ErrInvalidSource for the
// unreadable ones.
func (s *Store) List(ctx context.Context) ([]Source, error) {
	srcs, err := s.records.All(ctx)
	if srcs == nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	return srcs, err
}

// PageIn returns up to limit sources v sees after cursor ("": first) in id
// order, paged over its tenant's own, and the next cursor ("" on the last
// page).
func (s *Store) PageIn(ctx context.Context, v tenancy.View, cursor string, limit int) ([]Source, string, error) {
	page, err := s.records.ListIn(ctx, v, cursor, limit)
	if page.Items == nil {
		return nil, "", fmt.Errorf("list sources: %w", err)
	}
	return page.Items, page.NextCursor, err
}

// DeleteIn removes a source v sees and its shared health; a missing or
// another tenant's source is ErrSourceNotFound.
func (s *Store) DeleteIn(ctx context.Context, v tenancy.View, id string) error {
	err := s.records.DeleteIn(ctx, v, id)
	if errors.Is(err, recordstore.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrSourceNotFound, clip.Marked(id, maxQuoted))
	}
	if err != nil {
		return fmt.Errorf("delete source %s: %w", clip.Marked(id, maxQuoted), err)
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

// LoadFile reads a JSON array of at most MaxSources sources, strictly,
// validated and defaulted, in file order.
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
	dec := json.NewDecoder(bytes.NewReader(b))
	var raw []json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("load sources from %s: %w: want a JSON array of sources: %w", path, ErrInvalidSource, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("load sources from %s: %w: data after the array of sources", path, ErrInvalidSource)
	}
	if len(raw) > MaxSources {
		return nil, fmt.Errorf("load sources from %s: %w: %d sources exceed %d", path, ErrInvalidSource, len(raw), MaxSources)
	}
	out := make([]Source, 0, len(raw))
	seen := make(map[string]bool, len(raw))
	for i, r := range raw {
		var src Source
		if err := json.Unmarshal(r, &src); err != nil {
			return nil, fmt.Errorf("load sources from %s: source %d: %w", path, i, err)
		}
		if err := src.Validate(); err != nil {
			return nil, fmt.Errorf("load sources from %s: source %d: %w", path, i, err)
		}
		if seen[src.ID] {
			return nil, fmt.Errorf("load sources from %s: %w: source %d: id %q is used twice", path, ErrInvalidSource, i, src.ID)
		}
		seen[src.ID] = true
		out = append(out, src.WithDefaults())
	}
	return out, nil
}
