package comicbench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/dropstream/dropstream/flows/comic"
)

// Worlds are the data distributions a run can use (Config.World). All
// draw from one catalogue (issues 1..300 with half the interest on 1..20,
// 20% variants, printings 1..3, years 1960..2024, the 25 CGC grades, 8
// publishers weighted like the market, three subscriptions per email) and
// differ in how many subscribers a listed comic reaches (figures in
// BENCHMARKS.md, "Comic flow").
//
// WorldWantList (the default) is a rare-comic marketplace of want lists:
// 50,000 series, 30% of the interest on the top 500; about 75% of
// subscriptions name a series and an issue, 25% a series with at most one
// more field, 1 in 30,000 a publisher or everything. key_issue
// constraints are always true.
//
// WorldBroad is deliberately heavy: 5,000 series, 40% of the interest on
// the top 100, 15% whole-series and about 1% publisher-wide subscriptions,
// 0.01% everything, key_issue drawn like a comic's.
//
// WorldRanges is WorldWantList's catalogue and comics with half of the
// subscriptions range filters (rangeMix), half of those on the ten
// busiest series.
const (
	WorldWantList = "wantlist"
	WorldBroad    = "broad"
	WorldRanges   = "ranges"
)

// Worlds lists the world names, the default first.
var Worlds = []string{WorldWantList, WorldBroad, WorldRanges}

// WorldSummary describes each world in a line, for the bench's header.
var WorldSummary = map[string]string{
	WorldWantList: "want lists over 50,000 series, exact fields",
	WorldBroad:    "5,000 series, whole-series and publisher-wide subscriptions, exact fields",
	WorldRanges:   "the want-list catalogue, half of the subscriptions range filters, half of those on the ten busiest series",
}

// rangeMix is the share of each kind of range subscription of WorldRanges:
// an issue wanted at a minimum grade (and a maximum price), an issue run,
// a decade of a series, and a series at a minimum grade under a price.
var rangeMix = []patternShare{
	{[]string{"grade", "issue", "series"}, 0.35},
	{[]string{"grade", "issue", "price_cents", "series"}, 0.25},
	{[]string{"issue~", "series"}, 0.15},
	{[]string{"series", "year"}, 0.15},
	{[]string{"grade", "price_cents", "series"}, 0.10},
}

// distribution is the shape of one world.
type distribution struct {
	seriesCount   int
	popularSeries int
	popularShare  float64
	// keyOnly makes every key_issue constraint true.
	keyOnly bool
	mix     []patternShare
	// rangeShare of the subscriptions are drawn from rangeMix, hotShare of
	// those on the ten busiest series.
	rangeShare, hotShare float64
}

// patternShare is the share of subscriptions of one SearchPattern.
type patternShare struct {
	fields []string
	share  float64
}

var wantListMix = []patternShare{
	{[]string{"issue", "series"}, 0.45},
	{[]string{"grade", "issue", "series"}, 0.12},
	{[]string{"issue", "series", "variant"}, 0.05},
	{[]string{"issue", "printing", "series"}, 0.03},
	{[]string{"issue", "publisher", "series"}, 0.05},
	{[]string{"issue", "key_issue", "series"}, 0.04},
	{[]string{"key_issue", "series"}, 0.10},
	{[]string{"series"}, 0.08},
	{[]string{"series", "year"}, 0.07},
	{[]string{"key_issue", "publisher"}, 0.00002},
	{[]string{"publisher"}, 0.00001},
	{nil, 0.000003},
}

var distributions = map[string]distribution{
	WorldWantList: {seriesCount: 50_000, popularSeries: 500, popularShare: 0.30, keyOnly: true, mix: wantListMix},
	WorldRanges: {seriesCount: 50_000, popularSeries: 500, popularShare: 0.30, keyOnly: true, mix: wantListMix,
		rangeShare: 0.5, hotShare: 0.5},
	WorldBroad: {seriesCount: 5_000, popularSeries: 100, popularShare: 0.40, mix: []patternShare{
		{[]string{"issue", "series"}, 0.35},
		{[]string{"series"}, 0.15},
		{[]string{"issue", "publisher", "series"}, 0.10},
		{[]string{"grade", "issue", "series"}, 0.10},
		{[]string{"key_issue", "series"}, 0.08},
		{[]string{"issue", "key_issue", "series"}, 0.05},
		{[]string{"series", "year"}, 0.05},
		{[]string{"publisher", "series"}, 0.05},
		{[]string{"issue", "series", "variant"}, 0.04},
		{[]string{"key_issue", "publisher"}, 0.005},
		{[]string{"grade", "key_issue", "publisher"}, 0.0039},
		{[]string{"publisher"}, 0.001},
		{nil, 0.0001},
	}},
}

// checkWorld reports an unknown world name.
func checkWorld(name string) error {
	if _, ok := distributions[name]; !ok {
		return fmt.Errorf("comicbench: unknown world %q, want one of %s", name, strings.Join(Worlds, ", "))
	}
	return nil
}

var publishers = []string{"Marvel", "DC", "Image", "Dark Horse", "IDW", "Boom!", "Dynamite", "Valiant"}
var publisherWeights = []float64{0.35, 0.30, 0.10, 0.08, 0.06, 0.05, 0.04, 0.02}

// world draws comics and subscription bodies from a distribution (the same
// sequence for the same seed).
type world struct {
	d           distribution
	r           *rand.Rand
	shares      []float64
	rangeShares []float64
}

func newWorld(name string, seed uint64) *world {
	w := &world{d: distributions[name], r: rand.New(rand.NewPCG(seed, 2))}
	for _, p := range w.d.mix {
		w.shares = append(w.shares, p.share)
	}
	for _, p := range rangeMix {
		w.rangeShares = append(w.rangeShares, p.share)
	}
	return w
}

func (w *world) pick(weights []float64) int {
	total := 0.0
	for _, p := range weights {
		total += p
	}
	x := w.r.Float64() * total
	for i, p := range weights {
		if x < p {
			return i
		}
		x -= p
	}
	return len(weights) - 1
}

func (w *world) comic() comic.Comic {
	s := w.r.IntN(w.d.seriesCount)
	if w.r.Float64() < w.d.popularShare {
		s = w.r.IntN(w.d.popularSeries)
	}
	issue := 1 + w.r.IntN(300)
	if w.r.Float64() < 0.5 {
		issue = 1 + w.r.IntN(20)
	}
	variant := ""
	if w.r.Float64() < 0.2 {
		variant = "Variant " + strconv.Itoa(1+w.r.IntN(5))
	}
	return comic.Comic{Grade: comic.CGCGrades[w.r.IntN(len(comic.CGCGrades))], Issue: strconv.Itoa(issue),
		KeyIssue: w.r.Float64() < 0.1, PriceCents: int64(1000 + w.r.IntN(1_000_000)), Printing: int64(1 + w.r.IntN(3)),
		Publisher: publishers[w.pick(publisherWeights)], Series: "Series " + strconv.Itoa(s),
		Title: "Title " + strconv.Itoa(w.r.IntN(100000)), Variant: variant, Year: int64(1960 + w.r.IntN(65))}
}

// subscription returns the body of subscription i: a comic drawn from the
// same distribution, restricted to the fields of a pattern drawn from the
// world's mix.
func (w *world) subscription(i int) comic.NewSubscription {
	email := "c" + strconv.Itoa(i/3) + "@example.com"
	if w.d.rangeShare > 0 && w.r.Float64() < w.d.rangeShare {
		return comic.NewSubscription{Email: email, Body: w.rangeBody()}
	}
	full := w.comic().Body()
	body := comic.Body{}
	fields := w.d.mix[w.pick(w.shares)].fields
	for _, f := range fields {
		body[f] = full[f]
	}
	if w.d.keyOnly && slices.Contains(fields, "key_issue") {
		body["key_issue"] = true
	}
	return comic.NewSubscription{Email: email, Body: body.Canonical()}
}

// rangeBody draws a subscription of rangeMix around a drawn comic: grades
// from 6.0 up, prices up to twice the comic's, issue runs of 10 to 50
// from the comic's, the decade of the comic's year.
func (w *world) rangeBody() json.RawMessage {
	c := w.comic()
	if w.r.Float64() < w.d.hotShare {
		c.Series = "Series " + strconv.Itoa(w.r.IntN(10))
	}
	body := map[string]any{}
	for _, f := range rangeMix[w.pick(w.rangeShares)].fields {
		switch f {
		case "grade":
			body[f] = map[string]any{"gte": comic.CGCGrades[12+w.r.IntN(len(comic.CGCGrades)-12)]}
		case "issue":
			body[f] = c.Issue
		case "issue~":
			n, _ := strconv.Atoi(c.Issue)
			body["issue"] = map[string]any{"gte": n, "lte": n + 10 + w.r.IntN(41)}
		case "price_cents":
			body[f] = map[string]any{"lte": c.PriceCents * 2}
		case "series":
			body[f] = c.Series
		case "year":
			body[f] = map[string]any{"gte": c.Year / 10 * 10, "lte": c.Year/10*10 + 9}
		}
	}
	raw, _ := json.Marshal(body)
	return raw
}
