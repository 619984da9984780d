package checkout

import (
	"context"

	"github.com/dropstream/dropstream/clickhouse"
)

// SagaStatus reads attempt tr's status and reason ("" if none).
func (s *Flow) SagaStatus(ctx context.Context, orderID string, tr int64) (status, reason string, err error) {
	return sagaStatus(ctx, s.rdb, s.keys, orderID, tr)
}

// WithHistory has Timeline read expired attempts from ch.
func (s *Flow) WithHistory(ch *clickhouse.Client) { s.ch = ch }
