// Package jsontest checks that the JSON library the notifier writes its
// records with encodes them as encoding/json does.
package jsontest

import (
	"encoding/json"
	"reflect"
	"testing"

	gojson "github.com/goccy/go-json"
)

// EveryFieldSet fails t unless every field of the struct v is non-zero, so
// a test comparing the library with encoding/json on v covers a new field.
func EveryFieldSet(t testing.TB, v any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		if rv.Field(i).IsZero() {
			t.Errorf("%s.%s is zero: set it, so the encoding test covers it", rv.Type().Name(), rv.Type().Field(i).Name)
		}
	}
}

// MatchesEncodingJSON fails t unless github.com/goccy/go-json marshals each
// case (through a pointer, as the notifier does) as json.Marshal does.
func MatchesEncodingJSON[T any](t *testing.T, cases map[string]T) {
	t.Helper()
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(&v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := gojson.Marshal(&v)
			if err != nil || string(got) != string(want) {
				t.Errorf("gojson.Marshal = %s, %v\nwant %s", got, err, want)
			}
		})
	}
}
