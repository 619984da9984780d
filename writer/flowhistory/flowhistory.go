// Package flowhistory declares a sink history as a flow.History, so that
// sink does not import the flow contract.
package flowhistory

import (
	"context"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// Of declares the history cfg configures: its tables, group and Open,
// which builds the sink.History and returns its stages and Close.
func Of[R any](cfg sink.HistoryConfig[R], tel stream.Telemetry) flow.History {
	return flow.History{Tables: cfg.Tables, Groups: []flow.Group{{Topic: cfg.Topic, Name: cfg.Stage}},
		Open: func(_ context.Context, ch *clickhouse.Client) ([]stream.Stage, func() error, error) {
			h, err := sink.NewHistory(ch, cfg, tel)
			if err != nil {
				return nil, nil, err
			}
			return h.Stages(), h.Close, nil
		}}
}
