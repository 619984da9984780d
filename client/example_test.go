package client_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/dropstream/dropstream/client"
)

// A watcher created, read back, and the open availability listed, with a
// write key.
func Example() {
	ctx := context.Background()
	c, err := client.NewClientWithResponses("http://localhost:8080", client.WithRequestEditorFn(
		func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer my-write-key")
			return nil
		}))
	if err != nil {
		log.Fatal(err)
	}
	venue, provider := "v1", "simulator"
	created, err := c.PostV1WatchersWithResponse(ctx, client.Watcher{Name: "dinner", Provider: &provider, Venue: &venue, Channel: "log"})
	if err != nil {
		log.Fatal(err)
	}
	if created.JSON201 == nil { // a 4xx: created.JSON4XX is the error envelope
		log.Fatalf("create: %d %s", created.StatusCode(), created.Body)
	}
	w, err := c.GetV1WatchersIdWithResponse(ctx, *created.JSON201.Id)
	if err != nil {
		log.Fatal(err)
	}
	open := "open"
	page, err := c.GetV1AvailabilityWithResponse(ctx, &client.GetV1AvailabilityParams{Venue: &venue, State: &open})
	if err != nil {
		log.Fatal(err)
	}
	if w.JSON200 != nil && page.JSON200 != nil {
		fmt.Println(w.JSON200.Name, len(*page.JSON200.Items))
	}
}
