package comic

import "github.com/dropstream/dropstream/flows/checkout"

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
