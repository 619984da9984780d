package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dropstream/dropstream/api/apitest"
	"github.com/dropstream/dropstream/flows/offer"
	"github.com/dropstream/dropstream/internal/testenv"
)

// TestListRoutes_exactPagesAndCompleteWalks enumerates, from the demo's
// OpenAPI document, every GET route without path parameters that takes a
// limit, and checks on the demo's data that a bad limit is a 400, that a
// walk of pages of limit 1 gives full pages until the last and each item
// once, and that it lists what one large page lists.
func TestListRoutes_exactPagesAndCompleteWalks(t *testing.T) {
	clearEnv(t)
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	base := "http://" + addr
	demo := startDispatch(t, "demo", "--api-addr", addr, "--tick", "1h", "--interval", "1h")
	demo.waitFor(t, 60*time.Second, func() bool {
		status, body := get(t, base+"/v1/sources")
		return status == http.StatusOK && strings.Contains(string(body), `"id"`)
	}, "the demo's sources")
	// The offers are seeded beside the running API: walk them once all are in.
	demo.waitFor(t, 60*time.Second, func() bool {
		status, body := get(t, base+"/v1/offers?limit=1000")
		var p rawPage
		return status == http.StatusOK && json.Unmarshal(body, &p) == nil && len(p.Items) == offer.DemoOffers
	}, "the demo's offers")

	status, body := get(t, base+"/openapi.json")
	if status != http.StatusOK {
		t.Fatalf("/openapi.json: %d", status)
	}
	contract, err := apitest.ParseContract(body)
	if err != nil {
		t.Fatal(err)
	}
	// get and page check every answer against the document.
	get := func(t *testing.T, u string) (int, []byte) { return checkedGet(t, contract, u) }
	page := func(t *testing.T, u string) rawPage { return checkedPage(t, contract, u) }
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name, In string
				Required bool
			}
		}
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	var routes []string
	for path, ops := range doc.Paths {
		op, ok := ops["get"]
		// Statistics are aggregates over ClickHouse (their limit bounds
		// rows, they list no stored objects; without ClickHouse they
		// answer 503): their query checks are in the flows' stats tests.
		if !ok || strings.Contains(path, "{") || strings.HasPrefix(path, "/v1/stats/") {
			continue
		}
		limited, required := false, false
		for _, p := range op.Parameters {
			limited = limited || p.Name == "limit"
			required = required || p.Required
		}
		if limited && !required {
			routes = append(routes, path)
		}
	}
	for _, want := range []string{"/v1/sources", "/v1/watchers", "/v1/feeds", "/v1/offers", "/v1/subscribers"} {
		if !strings.Contains(strings.Join(routes, " "), want+" ") && !strings.HasSuffix(strings.Join(routes, " "), want) {
			t.Errorf("%s is not among the paged list routes %v", want, routes)
		}
	}
	for _, path := range routes {
		t.Run(path, func(t *testing.T) {
			if status, _ := get(t, base+path+"?limit=abc"); status != http.StatusBadRequest {
				t.Errorf("limit=abc: %d, want 400", status)
			}
			all := page(t, base+path+"?limit=1000")
			if all.NextCursor != "" {
				t.Skipf("more than 1000 items: the walk would be long")
			}
			seen := map[string]bool{}
			cursor := ""
			for range len(all.Items) + 2 {
				p := page(t, base+path+"?limit=1&cursor="+url.QueryEscape(cursor))
				if p.NextCursor != "" && len(p.Items) != 1 || len(p.Items) > 1 {
					t.Fatalf("a page of limit 1 holds %d items (next_cursor %q)", len(p.Items), p.NextCursor)
				}
				for _, it := range p.Items {
					if seen[string(it)] {
						t.Fatalf("item listed twice: %s", it)
					}
					seen[string(it)] = true
				}
				if cursor = p.NextCursor; cursor == "" {
					break
				}
			}
			if cursor != "" || len(seen) != len(all.Items) {
				t.Fatalf("the walk listed %d items, one page of 1000 %d", len(seen), len(all.Items))
			}
			t.Logf("%d items", len(seen))
		})
	}
}

type rawPage struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor string            `json:"next_cursor"`
}

// checkedGet runs GET u and checks the exchange against the contract.
func checkedGet(t *testing.T, contract *apitest.Contract, u string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := apitest.Response{Status: res.StatusCode, Header: res.Header, Body: body}
	if err := contract.Check(context.Background(), req, nil, out); err != nil {
		t.Errorf("OpenAPI contract: %v", err)
	}
	return res.StatusCode, body
}

// checkedPage runs GET u, checked against the contract, and decodes its page.
func checkedPage(t *testing.T, contract *apitest.Contract, u string) rawPage {
	t.Helper()
	status, body := checkedGet(t, contract, u)
	var p rawPage
	if status != http.StatusOK || json.Unmarshal(body, &p) != nil {
		t.Fatalf("GET %s: %d %s", u, status, body)
	}
	return p
}
