package settings

import (
	"flag"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

type tagged struct {
	N        int           `flag:"n" default:"5" range:"1..10" help:"a count"`
	Every    time.Duration `flag:"every-time" default:"2s" range:"1s.."`
	Share    float64       `range:"0..1"`
	Plain    string        `default:"x"`
	On       bool          `default:"true"`
	Big      uint64        `default:"0x10"`
	MaxBytes int64         `default:"64KiB" range:"1KiB..16MiB"`
	TTL      time.Duration `default:"1h"`
	MinWait  time.Duration `default:"1ms" range:"1ms..TTL"`
}

func TestDefaults_fillOnlyZeroFields(t *testing.T) {
	full := tagged{N: 5, Every: 2 * time.Second, Plain: "x", On: true, Big: 16, MaxBytes: 64 << 10, TTL: time.Hour, MinWait: time.Millisecond}
	for _, tc := range []struct {
		name    string
		in, out tagged
	}{
		{"zero takes every default", tagged{}, full},
		{"set fields stay", tagged{N: 7, Plain: "y", TTL: time.Minute}, func() tagged { c := full; c.N, c.Plain, c.TTL = 7, "y", time.Minute; return c }()},
		{"negative is not zero", tagged{Every: -1}, func() tagged { c := full; c.Every = -1; return c }()},
		{"fields without a default stay zero", tagged{Share: 0.5}, func() tagged { c := full; c.Share = 0.5; return c }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.in
			Defaults(&c)
			if c != tc.out {
				t.Errorf("Defaults = %+v, want %+v", c, tc.out)
			}
		})
	}
}

func TestDefaults_malformedTagPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "N") {
			t.Errorf("recovered %v, want a panic naming the field", r)
		}
	}()
	Defaults(&struct {
		N int `default:"five"`
	}{})
}

func TestBindFlags_startAtTheDefaultsAndParse(t *testing.T) {
	var c tagged
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	BindFlags(fs, &c)
	if c.N != 5 || c.Every != 2*time.Second || fs.Lookup("n").DefValue != "5" || fs.Lookup("plain") != nil {
		t.Fatalf("bound %+v, n's default %q", c, fs.Lookup("n").DefValue)
	}
	if err := fs.Parse([]string{"--n", "3", "--every-time", "5s"}); err != nil || c.N != 3 || c.Every != 5*time.Second {
		t.Errorf("parsed %+v, %v", c, err)
	}
}

func TestCheck_namesEachFieldOutOfRange(t *testing.T) {
	valid := tagged{N: 10, Every: time.Second, Share: 1, MaxBytes: 1 << 10, TTL: time.Hour, MinWait: time.Hour}
	for _, tc := range []struct {
		name   string
		prefix string
		change func(*tagged)
		want   []string
	}{
		{"bounds are inside", "t", func(*tagged) {}, nil},
		{"above", "t", func(c *tagged) { c.N = 11 }, []string{"t: n 11 out of range 1..10"}},
		{"below an open range", "t", func(c *tagged) { c.Every = time.Millisecond }, []string{"t: every time 1ms out of range 1s.."}},
		{"NaN is out", "t", func(c *tagged) { c.Share = math.NaN() }, []string{"t: share NaN out of range 0..1"}},
		{"sizes", "t", func(c *tagged) { c.MaxBytes = 512 }, []string{"t: max bytes 512 out of range 1KiB..16MiB"}},
		{"a bound names a field", "t", func(c *tagged) { c.MinWait = 2 * time.Hour }, []string{"t: min wait 2h0m0s out of range 1ms..ttl 1h0m0s"}},
		{"no prefix", "", func(c *tagged) { c.N = 0 }, []string{"n 0 out of range 1..10"}},
		{"every field is reported", "t", func(c *tagged) { c.N, c.Share = 0, 2 }, []string{"t: n 0 out of range", "t: share 2 out of range"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.change(&c)
			err := Check(tc.prefix, &c)
			if (err != nil) != (tc.want != nil) {
				t.Fatalf("Check = %v, want %q", err, tc.want)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Check = %v, want %q", err, want)
				}
			}
		})
	}
}

func TestName_splitsWordsAndAcronyms(t *testing.T) {
	for field, want := range map[string]string{"N": "n", "MaxInFlight": "max in flight", "TTL": "ttl", "ConfirmTTL": "confirm ttl", "HTMLTemplate": "html template"} {
		if got := name(reflect.StructField{Name: field}); got != want {
			t.Errorf("name(%s) = %q, want %q", field, got, want)
		}
	}
}
