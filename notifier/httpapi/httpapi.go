// Package httpapi serves the notifier's routes: subscribers with their
// public links, recent notifications and why each was sent, statistics.
package httpapi

import (
	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/notifier"
)

// Register adds SubscriberRoutes, NotificationRoutes and StatsRoutes over
// f to srv; stats answer 503 not_configured without ClickHouse.
func Register(srv *api.Server, f *notifier.Flow) {
	channels := f.Channels()
	SubscriberRoutes{Store: f.Subscribers(), Notify: f.Notify, PublicURL: f.PublicURL(), Egress: f.Egress(),
		HasChannel: func(ch string) bool { _, ok := channels[ch]; return ok }, Quota: f.SubscriberQuota()}.Register(srv)
	nr := NotificationRoutes{History: f.History(), Owner: f.OwnerOf}
	if f.ClickHouse() != nil {
		nr.Cause = f.Cause
	}
	nr.Register(srv)
	StatsRoutes{ClickHouse: f.ClickHouse()}.Register(srv)
}
