// Package jsonenctest helps tests of hand-written JSON encoders.
package jsonenctest

import (
	"encoding/json"
	"reflect"
	"testing"
)

// EveryFieldSet fails t unless every field of the struct v is non-zero, so
// a test comparing an encoder with encoding/json on v covers a new field.
func EveryFieldSet(t testing.TB, v any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		if rv.Field(i).IsZero() {
			t.Errorf("%s.%s is zero: set it, so the encoder's test covers it", rv.Type().Name(), rv.Type().Field(i).Name)
		}
	}
}

// MatchesEncodingJSON fails t unless appendJSON appends each case as
// json.Marshal encodes it.
func MatchesEncodingJSON[T any](t *testing.T, cases map[string]T, appendJSON func(T, []byte) ([]byte, error)) {
	t.Helper()
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendJSON(v, []byte("x"))
			if err != nil || string(got) != "x"+string(want) {
				t.Errorf("appendJSON = %s, %v\nwant x%s", got, err, want)
			}
		})
	}
}
