package writer

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/avail"
)

// ErrBadCursor is returned (wrapped) by List for a cursor it did not make.
var ErrBadCursor = errors.New("writer: invalid cursor")

// Page sizes of List.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// Filter selects entities for List. Zero fields match everything.
type Filter struct {
	Provider string
	// Venue is a venue id of the provider. With Provider (and Date with
	// both) it narrows the index range read; alone, List reads its range
	// under each provider present.
	Venue string
	// Date is "YYYY-MM-DD".
	Date string
	// PartySize, when positive, keeps entities for that party size.
	PartySize int
	// State is "", StateOpen or StateClosed.
	State string
}

// Validate reports whether f can be used.
func (f Filter) Validate() error {
	var errs []error
	if f.State != "" && f.State != StateOpen && f.State != StateClosed {
		errs = append(errs, fmt.Errorf("state %q: want open, closed or empty", f.State))
	}
	for name, v := range map[string]string{"provider": f.Provider, "venue": f.Venue, "date": f.Date} {
		if v != "" {
			errs = append(errs, avail.CleanPart(name, v))
		}
	}
	if f.PartySize < 0 {
		errs = append(errs, fmt.Errorf("party size %d is negative", f.PartySize))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("writer: filter: %w", err)
	}
	return nil
}

// prefix is the entity key prefix the filter pins down: provider, then venue,
// then date, as far as they are given in that order.
func (f Filter) prefix() string {
	var parts []string
	for _, v := range []string{f.Provider, f.Venue, f.Date} {
		if v == "" {
			break
		}
		parts = append(parts, v)
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "|") + "|"
}

// match reports whether an entity key passes the filter's key fields.
func (f Filter) match(key string) bool {
	e, err := avail.ParseKey(key)
	if err != nil {
		return f.Provider == "" && f.Venue == "" && f.Date == "" && f.PartySize == 0
	}
	return (f.Provider == "" || e.Provider == f.Provider) && (f.Venue == "" || e.Venue == f.Venue) &&
		(f.Date == "" || e.Date == f.Date) && (f.PartySize <= 0 || e.PartySize == f.PartySize)
}

// position is an entry of the merged index order: by key, then partition.
type position struct {
	key  string
	part int
}

func (a position) compare(b position) int {
	return cmp.Or(strings.Compare(a.key, b.key), cmp.Compare(a.part, b.part))
}

// List returns a page of entities matching f in key order and the next
// cursor ("" after the last). A page may be short with a cursor (see
// ProjectionConfig.MaxScan).
func (p *Projection) List(ctx context.Context, f Filter, cursor string, limit int) ([]EntityState, string, error) {
	if err := f.Validate(); err != nil {
		return nil, "", err
	}
	if limit < 1 {
		limit = DefaultListLimit
	}
	pos, started, err := p.decodeCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	s := &listScan{p: p, f: f, limit: min(limit, MaxListLimit), pos: pos, started: started}
	if f.Provider == "" && f.Venue != "" {
		err = s.byProvider(ctx)
	} else {
		prefix := f.prefix()
		err = s.scan(ctx, prefix, prefix, false)
	}
	if err != nil {
		return nil, "", fmt.Errorf("writer: list: %w", err)
	}
	items, err := p.load(ctx, s.picked, f.State)
	if err != nil {
		return nil, "", err
	}
	if s.exhausted {
		return items, "", nil
	}
	return items, encodeCursor(s.pos), nil
}

// listScan walks the partitions' indexes of a state in the merged order
// for List: pos is the last entry scanned, picked those matching.
type listScan struct {
	p         *Projection
	f         Filter
	limit     int
	pos       position
	started   bool
	scanned   int
	picked    []position
	exhausted bool
}

// full reports whether the page is full or the scan budget spent.
func (s *listScan) full() bool { return len(s.picked) >= s.limit || s.scanned >= s.p.cfg.MaxScan }

// scan reads the index entries from lo to those starting with prefix ("":
// all), after pos, in chunks, until the page is full or the range ends
// (exhausted), or after one chunk when once.
func (s *listScan) scan(ctx context.Context, lo, prefix string, once bool) error {
	hi := "+"
	if prefix != "" {
		hi = "[" + prefix + "\xff" // UTF-8 text never holds the byte 0xff
	}
	chunk := int64(min(max(s.limit, 64), MaxListLimit))
	s.exhausted = false
	for !s.full() && !s.exhausted {
		cmds, err := s.ranges(ctx, func(q int) string { return lowBound(lo, s.pos, s.started, q) }, hi, chunk)
		if err != nil {
			return err
		}
		var cands []position
		var bound *position // entries after it may be missing from this round
		for q, c := range cmds {
			vals := c.Val()
			for _, k := range vals {
				cands = append(cands, position{k, q})
			}
			if int64(len(vals)) == chunk {
				last := position{vals[len(vals)-1], q}
				if bound == nil || last.compare(*bound) < 0 {
					bound = &last
				}
			}
		}
		slices.SortFunc(cands, position.compare)
		i := 0
		for ; i < len(cands) && !s.full(); i++ {
			if bound != nil && cands[i].compare(*bound) > 0 {
				break
			}
			s.pos, s.started = cands[i], true
			s.scanned++
			if s.f.match(cands[i].key) {
				s.picked = append(s.picked, cands[i])
			}
		}
		s.exhausted = bound == nil && i == len(cands)
		if once {
			break
		}
	}
	return nil
}

// byProvider scans a filter with a venue but no provider: the first page
// reads one chunk of the whole index (all of a small one); then it goes on
// as a loose index scan: it finds the providers present in key order by
// jumping past each one's keys, and scans only the range of the venue
// within each. The order and the cursor are those of a whole scan.
func (s *listScan) byProvider(ctx context.Context) error {
	if !s.started {
		if err := s.scan(ctx, "", "", true); err != nil || s.exhausted {
			return err
		}
	}
	from := "[" + s.pos.key
	for !s.full() {
		first, err := s.first(ctx, from)
		if err != nil {
			return err
		}
		if first == "" {
			s.exhausted = true
			return nil
		}
		provider, _, ok := strings.Cut(first, "|")
		if !ok { // not an entity key of a provider: it cannot match
			from = "(" + first
			continue
		}
		f := s.f
		f.Provider = provider
		prefix := f.prefix()
		lo := prefix
		if provider == "source" && f.Date == "" {
			lo = avail.SourceKey(f.Venue) // a source's health entity: source|<id>
		}
		if err := s.scan(ctx, lo, prefix, false); err != nil || !s.exhausted {
			return err
		}
		from = "(" + provider + "|\xff"
	}
	s.exhausted = false // later providers may match
	return nil
}

// first returns the smallest index entry from the lex bound from over all
// partitions, "" if none.
func (s *listScan) first(ctx context.Context, from string) (string, error) {
	cmds, err := s.ranges(ctx, func(int) string { return from }, "+", 1)
	if err != nil {
		return "", err
	}
	first := ""
	for _, c := range cmds {
		if v := c.Val(); len(v) > 0 && (first == "" || v[0] < first) {
			first = v[0]
		}
	}
	return first, nil
}

// ranges reads up to count entries of each partition's index of the
// state, from lo(q) to hi, in one pipeline.
func (s *listScan) ranges(ctx context.Context, lo func(q int) string, hi string, count int64) ([]*redis.StringSliceCmd, error) {
	cmds := make([]*redis.StringSliceCmd, s.p.cfg.Partitions)
	_, err := s.p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for q := range cmds {
			cmds[q] = pipe.ZRangeByLex(ctx, indexKey(s.p.topic.HashTag(q), s.f.State),
				&redis.ZRangeBy{Min: lo(q), Max: hi, Count: count})
		}
		return nil
	})
	return cmds, err
}

// lowBound is partition q's ZRANGEBYLEX start: after pos in the merged order,
// and not before lo.
func lowBound(lo string, pos position, started bool, q int) string {
	if !started || pos.key < lo {
		if lo == "" {
			return "-"
		}
		return "[" + lo
	}
	if q <= pos.part {
		return "(" + pos.key
	}
	return "[" + pos.key
}

// load reads the picked entities' hashes, dropping those that left state
// and unindexing the expired.
func (p *Projection) load(ctx context.Context, picked []position, state string) ([]EntityState, error) {
	if len(picked) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(picked))
	_, err := p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, c := range picked {
			cmds[i] = pipe.HGetAll(ctx, keysOf(p.topic.HashTag(c.part), c.key).entity)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("writer: list: %w", err)
	}
	items := make([]EntityState, 0, len(picked))
	var gone []position
	for i, c := range cmds {
		if len(c.Val()) == 0 {
			gone = append(gone, picked[i])
			continue
		}
		e := entityFromHash(picked[i].key, picked[i].part, c.Val())
		if state != "" && e.State != state {
			continue
		}
		items = append(items, e)
	}
	if err := p.unindex(ctx, gone); err != nil {
		return nil, err
	}
	return items, nil
}

func encodeCursor(pos position) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(pos.part) + "|" + pos.key))
}

// decodeCursor returns the position a cursor names; started is false for "".
func (p *Projection) decodeCursor(cursor string) (pos position, started bool, err error) {
	if cursor == "" {
		return position{}, false, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return position{}, false, ErrBadCursor
	}
	num, key, ok := strings.Cut(string(raw), "|")
	part, err := strconv.Atoi(num)
	if !ok || err != nil || part < 0 || part >= p.cfg.Partitions || key == "" {
		return position{}, false, ErrBadCursor
	}
	return position{key, part}, true, nil
}
