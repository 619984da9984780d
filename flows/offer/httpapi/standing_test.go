package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/flows/offer"
)

const standingJSON = `{"name":"p1 offers","subscriberId":"s_0123456789abcdef0123456789ab","filter":{"filterType":"sellOffer","type":"group",
	"elements":[{"type":"logical","logicalTag":"product","productIds":["p1"]}]}}`

func TestPercolateRoutes_createListGetDeleteWithinTheCallersQuota(t *testing.T) {
	srv := offerServer(t, time.Second, true)
	var ids []string
	for range 3 {
		var ss offer.StandingSearch
		if code := call(t, srv, "POST", "/v1/standing-searches", "w", standingJSON, &ss); code != http.StatusCreated || ss.ID == "" {
			t.Fatalf("create = %d %+v", code, ss)
		}
		ids = append(ids, ss.ID)
	}
	var page api.Page[offer.StandingSearch]
	if code := call(t, srv, "GET", "/v1/standing-searches?limit=2", "w", "", &page); code != 200 || len(page.Items) != 2 || page.NextCursor == "" {
		t.Fatalf("first page = %d %+v", code, page)
	}
	var rest api.Page[offer.StandingSearch]
	if code := call(t, srv, "GET", "/v1/standing-searches?limit=2&cursor="+page.NextCursor, "w", "", &rest); code != 200 || len(rest.Items) != 1 || rest.NextCursor != "" {
		t.Fatalf("second page = %d %+v", code, rest)
	}
	// Another caller (the read key) sees none of them.
	var other api.Page[offer.StandingSearch]
	if code := call(t, srv, "GET", "/v1/standing-searches", "r", "", &other); code != 200 || len(other.Items) != 0 {
		t.Fatalf("list of another caller = %d %+v", code, other)
	}
	for _, tc := range []struct {
		name, method, path, key, body string
		want                          int
		code                          string
	}{
		{"get own", "GET", "/v1/standing-searches/" + ids[0], "w", "", 200, ""},
		{"get another's", "GET", "/v1/standing-searches/" + ids[0], "r", "", 404, "standing_search_not_found"},
		{"create without a subscriber", "POST", "/v1/standing-searches", "w", strings.Replace(standingJSON, writersSubscriber, "nobody", 1), 422, "invalid_standing_search"},
		{"create with a bad filter", "POST", "/v1/standing-searches", "w", strings.Replace(standingJSON, `"sellOffer"`, `"other"`, 1), 422, "invalid_standing_search"},
		{"create with the read key", "POST", "/v1/standing-searches", "r", standingJSON, 403, "forbidden"},
		{"create beyond the quota", "POST", "/v1/standing-searches", "w", standingJSON, 409, "quota_exceeded"},
		{"delete another's", "DELETE", "/v1/standing-searches/" + ids[0], "r", "", 403, "forbidden"},
		{"delete own", "DELETE", "/v1/standing-searches/" + ids[0], "w", "", 204, ""},
		{"delete again", "DELETE", "/v1/standing-searches/" + ids[0], "w", "", 404, "standing_search_not_found"},
		// Below the quota: a subscriber the caller does not see is one that
		// does not exist, and takes no slot.
		{"create naming another tenant's subscriber", "POST", "/v1/standing-searches", "w", strings.Replace(standingJSON, writersSubscriber, readersSubscriber, 1), 404, "subscriber_not_found"},
		{"create naming a subscriber never stored", "POST", "/v1/standing-searches", "w", strings.Replace(standingJSON, writersSubscriber, "s_0123456789abcdef0123456789ff", 1), 404, "subscriber_not_found"},
		{"create within the quota again", "POST", "/v1/standing-searches", "w", standingJSON, 201, ""},
	} {
		var env envelopeOut
		if code := call(t, srv, tc.method, tc.path, tc.key, tc.body, &env); code != tc.want || env.Error.Code != tc.code {
			t.Errorf("%s: %s %s = %d %q, want %d %q", tc.name, tc.method, tc.path, code, env.Error.Code, tc.want, tc.code)
		}
	}
}
