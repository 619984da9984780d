// Package flowhistory declares a flow's ClickHouse history appended by
// writer/sink (sink.NewHistory) as the flow contract's flow.History, in one
// call. It is a package of its own so that sink does not import the flow
// contract.
package flowhistory

import (
	"context"

	"github.com/dropstream/dropstream/clickhouse"
	"github.com/dropstream/dropstream/flow"
	"github.com/dropstream/dropstream/stream"
	"github.com/dropstream/dropstream/writer/sink"
)

// Of declares the history cfg configures: its tables, its group
// (cfg.Topic, cfg.Stage), and Open, which builds the sink.History over
// ClickHouse and returns its stages and its Close. Invalid settings fail
// Open.
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
