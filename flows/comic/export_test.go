package comic

// NotifyURLOf returns the flow's own notify URL as its delivery stage
// stored it.
func NotifyURLOf(f *Flow) string { return f.Delivery.cfg.NotifyURL }
