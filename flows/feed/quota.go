package feed

import (
	"context"
	"errors"

	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/internal/quota"
)

// The flow's variables: caps of what each caller (API key, or client
// address on an open API) may create.
const (
	VarQuotaFeeds         = "DROPSTREAM_QUOTA_FEEDS"
	VarQuotaSubscriptions = "DROPSTREAM_QUOTA_FEED_SUBSCRIPTIONS"
)

// Vars are the variables the flow reads.
var Vars = []flow.Var{
	{Name: VarQuotaFeeds, Kind: flow.Int, Default: "100", Usage: "feeds each API key (each client address on an open API) may add; beyond it 409 quota_exceeded; 0: no cap"},
	{Name: VarQuotaSubscriptions, Kind: flow.Int, Default: "1000", Usage: "feed subscriptions each API key (each client address on an open API) may create; beyond it 409 quota_exceeded; 0: no cap"},
}

// quotas builds the caps of Config.MaxFeedsPerCaller and
// MaxSubscriptionsPerCaller.
func (f *Flow) quotas() error {
	feeds, err := quota.Optional(f.rdb, "feeds", f.cfg.MaxFeedsPerCaller)
	if err != nil {
		return err
	}
	subs, err := quota.Optional(f.rdb, "feed-subscriptions", f.cfg.MaxSubscriptionsPerCaller)
	if err != nil {
		return err
	}
	f.feedCap = feeds.WithExists(func(ctx context.Context, id string) (bool, error) {
		_, err := f.store.Feed(ctx, id)
		return present(err)
	})
	f.subCap = subs.WithExists(func(ctx context.Context, id string) (bool, error) {
		_, err := f.store.Subscription(ctx, id)
		return present(err)
	})
	return nil
}

// present maps a lookup's error to whether the record exists.
func present(err error) (bool, error) {
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// FeedQuota is the cap of feeds per caller; nil: none.
func (f *Flow) FeedQuota() *quota.Quota { return f.feedCap }

// SubscriptionQuota is the cap of subscriptions per caller; nil: none.
func (f *Flow) SubscriptionQuota() *quota.Quota { return f.subCap }
