package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
)

// soakMaxGrowth is the most a figure may grow from the settle sample to
// the end.
const soakMaxGrowth = 0.10

// soakSample is one process's figures at one time.
type soakSample struct {
	At time.Duration
	// RSS is the largest resident set since the sample before (read every
	// soakRSSEvery, and process_resident_memory_bytes at the sample); Heap
	// go_gc_heap_live_bytes (the heap marked live by the last GC);
	// Goroutines go_goroutines.
	RSS, Heap, Goroutines float64
	// Keys is DBSIZE of the process's Redis.
	Keys int64
}

// soakFigures are the metrics a sample reads from /metrics.
var soakFigures = []string{"process_resident_memory_bytes", "go_gc_heap_live_bytes", "go_goroutines"}

// parseSoakMetrics reads the sample's process figures from a Prometheus
// text exposition; a figure missing is an error.
func parseSoakMetrics(r io.Reader) (soakSample, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return soakSample{}, fmt.Errorf("parse /metrics: %w", err)
	}
	vals := make([]float64, len(soakFigures))
	for i, name := range soakFigures {
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) == 0 {
			return soakSample{}, fmt.Errorf("/metrics has no %s", name)
		}
		m := f.GetMetric()[0]
		vals[i] = m.GetGauge().GetValue() + m.GetUntyped().GetValue() + m.GetCounter().GetValue()
	}
	return soakSample{RSS: vals[0], Heap: vals[1], Goroutines: vals[2]}, nil
}

// soakHeapReads is how many live-heap figures a sample takes the median
// of, each right after a forced GC: one figure moves by ±5 % with what is
// in flight at that GC.
const soakHeapReads = 5

// sample reads the process's /metrics soakHeapReads times, each after a
// GC forced through its pprof heap endpoint, and its Redis's DBSIZE. The
// heap is the median of the reads; RSS and goroutines the last read's.
func (p *soakProc) sample(ctx context.Context, at time.Duration) (soakSample, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var s soakSample
	heaps := make([]float64, 0, soakHeapReads)
	for range soakHeapReads {
		if err := p.get(ctx, "http://"+p.pprof+"/debug/pprof/heap?gc=1", io.Discard); err != nil {
			return soakSample{}, fmt.Errorf("forced gc: %w", err)
		}
		var err error
		if s, err = p.metrics(ctx); err != nil {
			return soakSample{}, err
		}
		heaps = append(heaps, s.Heap)
	}
	slices.Sort(heaps)
	s.Heap, s.At = heaps[len(heaps)/2], at
	var err error
	if s.Keys, err = p.rdb.DBSize(ctx).Result(); err != nil {
		return soakSample{}, fmt.Errorf("dbsize: %w", err)
	}
	return s, nil
}

// metrics reads the sample's figures from the process's /metrics.
func (p *soakProc) metrics(ctx context.Context) (soakSample, error) {
	var b strings.Builder
	if err := p.get(ctx, "http://"+p.api+"/metrics", &b); err != nil {
		return soakSample{}, err
	}
	return parseSoakMetrics(strings.NewReader(b.String()))
}

// get copies the body of a GET of url answered 200 to w.
func (p *soakProc) get(ctx context.Context, url string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// heapProfile saves the process's heap profile (after a GC) to path.
func (p *soakProc) heapProfile(ctx context.Context, path string) {
	p.save(path, "heap profile", func(w io.Writer) error {
		return p.get(ctx, "http://"+p.pprof+"/debug/pprof/heap?gc=1", w)
	})
}

// save writes a file with write; a failure is reported, not fatal.
func (p *soakProc) save(path, what string, write func(io.Writer) error) {
	f, err := os.Create(path)
	if err == nil {
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %s of %s: %v\n", what, p.name, err)
	}
}

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

// line is the sample as one printed line.
func (s soakSample) line(name string, l *soakLoad) string {
	out := fmt.Sprintf("%8s  %-12s rss %10s  heap %10s  goroutines %5.0f  redis keys %7d",
		s.At, name, mib(s.RSS), mib(s.Heap), s.Goroutines, s.Keys)
	if l != nil {
		out += "  load " + l.summary()
	}
	return out
}

// soakRow is one process's verdict: its figures at the settle sample and
// at the end, and their growth.
type soakRow struct {
	Name string
	// Base is the last sample at or before the settle time; End the last
	// sample.
	Base, End soakSample
	// Growth of each figure from Base to End (0.05 is 5%).
	RSS, Heap, Goroutines, Keys float64
	// KeysBounded says the keys count in the verdict: the demo's embedded
	// Redis lives in the process and bounds its records; `run`'s Redis
	// keeps records for days by design.
	KeysBounded bool
}

// growth is (end-base)/base; 0 when both are 0.
func growth(base, end float64) float64 {
	if base == 0 {
		if end == 0 {
			return 0
		}
		return 1
	}
	return (end - base) / base
}

// soakRowOf is the row of samples (in time order, at least one after
// settle).
func soakRowOf(name string, keysBounded bool, samples []soakSample, settle time.Duration) soakRow {
	r := soakRow{Name: name, KeysBounded: keysBounded}
	if len(samples) == 0 {
		return r
	}
	r.Base, r.End = samples[0], samples[len(samples)-1]
	for _, s := range samples {
		if s.At <= settle {
			r.Base = s
		}
	}
	r.RSS, r.Heap = growth(r.Base.RSS, r.End.RSS), growth(r.Base.Heap, r.End.Heap)
	r.Goroutines, r.Keys = growth(r.Base.Goroutines, r.End.Goroutines), growth(float64(r.Base.Keys), float64(r.End.Keys))
	return r
}

// failed names the figures that grew more than soakMaxGrowth.
func (r soakRow) failed() []string {
	var out []string
	for _, f := range []struct {
		name string
		g    float64
		in   bool
	}{{"rss", r.RSS, true}, {"heap", r.Heap, true}, {"goroutines", r.Goroutines, true}, {"keys", r.Keys, r.KeysBounded}} {
		if f.in && f.g > soakMaxGrowth {
			out = append(out, f.name)
		}
	}
	return out
}

func (r soakRow) ok() bool { return len(r.failed()) == 0 }

// verdict is "ok" or "GREW: <figures>".
func (r soakRow) verdict() string {
	if f := r.failed(); len(f) > 0 {
		return "GREW: " + strings.Join(f, ", ")
	}
	return "ok"
}

func pct(g float64) string { return fmt.Sprintf("%+.1f%%", 100*g) }

// writeSoakTable prints the rows as a Markdown table.
func writeSoakTable(w io.Writer, rows []soakRow, settle time.Duration) {
	fmt.Fprintf(w, "\nGrowth from the %s sample to the end (verdict: no figure above +%.0f%%; run's Redis keys are reported, not judged):\n\n",
		settle, 100*soakMaxGrowth)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "| process\t| RSS base → end\t| live heap base → end\t| goroutines\t| Redis keys\t| verdict\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|")
	for _, r := range rows {
		keys := fmt.Sprintf(" %d → %d (%s)", r.Base.Keys, r.End.Keys, pct(r.Keys))
		if !r.KeysBounded {
			keys += " by design"
		}
		fmt.Fprintf(tw, "| %s\t| %s → %s (%s)\t| %s → %s (%s)\t| %.0f → %.0f (%s)\t|%s\t| %s\t|\n", r.Name,
			mib(r.Base.RSS), mib(r.End.RSS), pct(r.RSS), mib(r.Base.Heap), mib(r.End.Heap), pct(r.Heap),
			r.Base.Goroutines, r.End.Goroutines, pct(r.Goroutines), keys, r.verdict())
	}
	tw.Flush()
}

// soakFamily is the keys of one family (a key name with its ids and
// partitions replaced by *) and what they hold.
type soakFamily struct {
	Name string
	Type string
	// Keys is how many; Elements the sum of their lengths (a string's
	// bytes, a hash's fields, a stream's entries, …); NoTTL how many
	// never expire.
	Keys, Elements, NoTTL int64
}

var (
	soakTagRE = regexp.MustCompile(`\{([a-z-]+)\.\d+\}`)
	soakIDRE  = regexp.MustCompile(`(^|:)[^:{}]*[0-9][^:{}]*`)
)

// soakLengths is the length command of each type: a string's bytes, a
// hash's fields, a stream's entries, …
var soakLengths = map[string]func(redis.Pipeliner, context.Context, string) *redis.IntCmd{
	"string": redis.Pipeliner.StrLen, "hash": redis.Pipeliner.HLen, "zset": redis.Pipeliner.ZCard,
	"set": redis.Pipeliner.SCard, "list": redis.Pipeliner.LLen, "stream": redis.Pipeliner.XLen,
}

// soakBatch is how many keys one pipeline of soakFamilies asks about.
const soakBatch = 500

// soakFamilyOf is the family of key: "ds:{avail.3}:entity:v1:42" is
// "ds:{avail.*}:entity:*:*". A part with a digit is an id.
func soakFamilyOf(key string) string {
	f := soakTagRE.ReplaceAllString(key, "{$1.*}")
	return soakIDRE.ReplaceAllString(f, "$1*")
}

// soakFamilies counts the keys of rdb by family, largest first.
func soakFamilies(ctx context.Context, rdb *redis.Client) ([]soakFamily, error) {
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	types := make([]*redis.StatusCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	lens := make([]*redis.IntCmd, len(keys))
	// In batches: a pipeline of every key outlasts the client's timeouts
	// on a busy embedded Redis.
	for lo := 0; lo < len(keys); lo += soakBatch {
		batch := keys[lo:min(lo+soakBatch, len(keys))]
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range batch {
				types[lo+i], ttls[lo+i] = p.Type(ctx, k), p.PTTL(ctx, k)
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("types: %w", err)
		}
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range batch {
				if l := soakLengths[types[lo+i].Val()]; l != nil {
					lens[lo+i] = l(p, ctx, k)
				}
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("lengths: %w", err)
		}
	}
	fams := map[string]soakFamily{}
	for i, k := range keys {
		name := soakFamilyOf(k)
		f, ok := fams[name]
		if !ok {
			f = soakFamily{Name: name, Type: types[i].Val()}
		}
		f.Keys++
		if lens[i] != nil {
			f.Elements += lens[i].Val()
		}
		if ttls[i].Val() < 0 { // -1: no TTL (-2, gone since KEYS, counts too: rare)
			f.NoTTL++
		}
		fams[name] = f
	}
	return slices.SortedFunc(maps.Values(fams), func(a, b soakFamily) int {
		return cmp.Or(cmp.Compare(b.Elements, a.Elements), strings.Compare(a.Name, b.Name))
	}), nil
}

// writeSoakFamilies writes the families as a table, one a line.
func writeSoakFamilies(w io.Writer, fams []soakFamily) error {
	for _, f := range fams {
		if _, err := fmt.Fprintf(w, "%8d keys %10d elements %8d no-ttl  %-6s %s\n", f.Keys, f.Elements, f.NoTTL, f.Type, f.Name); err != nil {
			return err
		}
	}
	return nil
}

// saveFamilies writes the families of the process's Redis to path.
func (p *soakProc) saveFamilies(ctx context.Context, path string) {
	p.save(path, "key families", func(w io.Writer) error {
		fams, err := soakFamilies(ctx, p.rdb)
		if err != nil {
			return err
		}
		return writeSoakFamilies(w, fams)
	})
}
