package writer

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

// TestEntityFromHash_readsEachFieldIntoItsJSONName sets one entity hash
// field at a time: the EntityState shows it under the same name.
func TestEntityFromHash_readsEachFieldIntoItsJSONName(t *testing.T) {
	if _, ok := entityFromHash("k", 1, make([]any, len(entityFields))); ok {
		t.Error("a hash without fields was found")
	}
	for i, name := range entityFields {
		vals := make([]any, len(entityFields))
		vals[i] = "7"
		e, ok := entityFromHash("k", 1, vals)
		b, _ := json.Marshal(e)
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil || !ok {
			t.Fatal(err, ok)
		}
		want := slices.Sorted(slices.Values([]string{"key", "partition", name}))
		if !slices.Equal(slices.Sorted(maps.Keys(got)), want) {
			t.Errorf("hash field %s alone gave %s", name, b)
		}
	}
}
