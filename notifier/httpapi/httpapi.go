// Package httpapi serves the notifier's routes: the subscribers (with the
// public opt-in and unsubscribe links), the recent notifications and why
// each was sent, and, with ClickHouse, the notification statistics.
package httpapi

import (
	"github.com/dropstream/dropstream/api"
	"github.com/dropstream/dropstream/notifier"
)

// Register adds the notifier's routes to srv: SubscriberRoutes and
// NotificationRoutes over f (with ClickHouse, the causes of
// notifications) and StatsRoutes (503 not_configured without ClickHouse).
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
