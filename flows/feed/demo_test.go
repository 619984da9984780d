package feed

import "testing"

func TestAppendDemoItem_keepsTheLatest(t *testing.T) {
	for _, tc := range []struct {
		added       int
		wantLen     int
		first, last string
	}{
		{added: 3, wantLen: 3, first: "demo-1", last: "demo-3"},
		{added: demoFeedItems, wantLen: demoFeedItems, first: "demo-1", last: "demo-20"},
		{added: 500, wantLen: demoFeedItems, first: "demo-481", last: "demo-500"},
	} {
		var items = appendDemoItem(nil, demoItem(1))
		for n := 2; n <= tc.added; n++ {
			items = appendDemoItem(items, demoItem(n))
		}
		if len(items) != tc.wantLen || items[0].GUID != tc.first || items[len(items)-1].GUID != tc.last {
			t.Errorf("%d added: %d items %s … %s, want %d %s … %s", tc.added, len(items), items[0].GUID, items[len(items)-1].GUID,
				tc.wantLen, tc.first, tc.last)
		}
	}
}
