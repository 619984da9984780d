package avail_test

import (
	"reflect"
	"testing"

	"github.com/dropstream/dropstream/avail"
)

func TestParseKey(t *testing.T) {
	tests := []struct {
		key  string
		want avail.Entity // zero: an error
	}{
		{key: "resy|v1|2099-03-08|19:00|2", want: avail.Entity{Key: "resy|v1|2099-03-08|19:00|2", Kind: avail.EntitySlot,
			Provider: "resy", Venue: "v1", Date: "2099-03-08", Time: "19:00", PartySize: 2}},
		{key: "resy|v1|2099-03-08|*|4", want: avail.Entity{Key: "resy|v1|2099-03-08|*|4", Kind: avail.EntityRestaurant,
			Provider: "resy", Venue: "v1", Date: "2099-03-08", PartySize: 4}},
		{key: "source|demo", want: avail.Entity{Key: "source|demo", Kind: avail.EntitySource, Venue: "demo"}},
		{key: ""},
		{key: "resy|v1"},
		{key: "source|demo|x"},
		{key: "resy|v1|2099-03-08|19:00"},
		{key: "resy|v1|2099-03-08|19:00|2|x"},
		{key: "resy|v1|2099-03-08|19:00|two"},
	}
	for _, tt := range tests {
		got, err := avail.ParseKey(tt.key)
		if (err != nil) != (tt.want.Key == "") || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v", tt.key, got, err, tt.want)
		}
	}
}
