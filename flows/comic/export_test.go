package comic

import (
	"context"

	"github.com/dropstream/dropstream/flows/checkout"
	"github.com/dropstream/dropstream/internal/tenancy"
)

// Checkout returns the checkout flow purchases are charged through; nil
// for a flow built by NewWith.
func (s *Flow) Checkout() *checkout.Flow { return s.checkout }

// NotifyURLOf returns the flow's own notify URL as its delivery stage
// stored it.
func NotifyURLOf(f *Flow) string { return f.Delivery.cfg.NotifyURL }

// FieldNames returns the schema's field names in alphabetical order.
func FieldNames() []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.name
	}
	return out
}

// ByEmail is ByEmailIn of every tenant's subscriptions.
func (s *Store) ByEmail(ctx context.Context, email string) ([]Subscription, error) {
	return s.ByEmailIn(ctx, tenancy.View{All: true}, email)
}

// Delete is DeleteIn of any tenant's subscription.
func (s *Store) Delete(ctx context.Context, id string) error {
	return s.DeleteIn(ctx, tenancy.View{All: true}, id)
}
