package comicbench

import (
	"math/rand/v2"
	"strconv"

	"github.com/dropstream/dropstream/flows/comic"
)

// Distribution of the benchmark data (the same for every run with the same
// seed), chosen so that, as on a rare-comic marketplace, most comics match
// few subscribers:
//
//   - Series: 50,000; 30% of the interest (subscriptions and listings
//     alike) goes to the 500 most popular, the rest is spread evenly.
//   - Issues 1..300, half of the interest on 1..20; 10% of comics are key
//     issues; 20% variants (5 per issue); printings 1..3; years 1960..2024;
//     the 25 CGC grades; 8 publishers weighted like the market.
//   - Subscriptions are want lists: about 75% name a series and an issue
//     (some refined by grade, variant, printing, publisher or key issue),
//     about 25% a series with at most one more field (its key issues, a
//     year, or the whole series), and a handful (about 1 in 30,000) a
//     whole publisher, a publisher's key issues, or everything.
//   - Three subscriptions per email.
//
// Measured with 1,000,000 subscriptions (seed 1): 12 active patterns;
// distinct subscribers per listed comic mean 25.6, p50 8, p90 66, p99 131,
// max 157 — half the comics reach at most 8 people, the popular series'
// key issues up to about 150 (the bench prints the distribution).
const (
	seriesCount   = 50_000
	popularSeries = 500
	popularShare  = 0.30
)

// patternMix is the share of subscriptions per SearchPattern.
var patternMix = []struct {
	fields []string
	share  float64
}{
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

var publishers = []string{"Marvel", "DC", "Image", "Dark Horse", "IDW", "Boom!", "Dynamite", "Valiant"}
var publisherWeights = []float64{0.35, 0.30, 0.10, 0.08, 0.06, 0.05, 0.04, 0.02}

// world draws comics and subscription bodies from the distribution above.
type world struct {
	r      *rand.Rand
	shares []float64
}

func newWorld(seed uint64) *world {
	w := &world{r: rand.New(rand.NewPCG(seed, 2))}
	for _, p := range patternMix {
		w.shares = append(w.shares, p.share)
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
	s := w.r.IntN(seriesCount)
	if w.r.Float64() < popularShare {
		s = w.r.IntN(popularSeries)
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
// same distribution, restricted to the fields of a pattern drawn from
// patternMix.
func (w *world) subscription(i int) comic.NewSubscription {
	full := w.comic().Body()
	body := comic.Body{}
	for _, f := range patternMix[w.pick(w.shares)].fields {
		body[f] = full[f]
	}
	if _, ok := body["key_issue"]; ok {
		body["key_issue"] = true // nobody watches for non-key issues
	}
	return comic.NewSubscription{Email: "c" + strconv.Itoa(i/3) + "@example.com", Body: body.Canonical()}
}
