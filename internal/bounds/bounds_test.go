package bounds_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dropstream/dropstream/internal/bounds"
)

func TestCheck_reportsOnlyValuesOutsideTheRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		errs []error
		want string
	}{
		{"low", bounds.Check(nil, "burst", 0, 1, 1000), "burst 0 out of range 1..1000"},
		{"high", bounds.Check(nil, "burst", 1001, 1, 1000), "burst 1001 out of range 1..1000"},
		{"bounds are inside", bounds.Check(bounds.Check(nil, "burst", 1, 1, 1000), "burst", 1000, 1, 1000), ""},
		{"durations read as durations", bounds.Check(nil, "interval", time.Second, time.Minute, time.Hour), "interval 1s out of range 1m0s..1h0m0s"},
		{"text names the range", bounds.CheckText(nil, "max body", 512, 1<<10, 64<<20, "1KiB..64MiB"), "max body 512 out of range 1KiB..64MiB"},
		{"text inside", bounds.CheckText(nil, "max body", 1<<10, 1<<10, 64<<20, "1KiB..64MiB"), ""},
		{"appends to earlier errors", bounds.Check([]error{errors.New("first")}, "n", -1, 0, 9), "first\nn -1 out of range 0..9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := errors.Join(tc.errs...); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRequire_reportsOnlyBrokenRules(t *testing.T) {
	errs := bounds.Require(nil, true, "never %d", 1)
	errs = bounds.Require(errs, false, "block %s below %s", time.Duration(0), time.Millisecond)
	if err := errors.Join(errs...); err == nil || err.Error() != "block 0s below 1ms" {
		t.Fatalf("got %v, want only the broken rule", err)
	}
}
