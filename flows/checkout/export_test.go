package checkout

import (
	"context"

	"github.com/dropstream/dropstream/clickhouse"
)

// SagaStatus reads attempt tr's status and reason ("" if none).
func (s *Flow) SagaStatus(ctx context.Context, orderID string, tr int64) (status, reason string, err error) {
	v, err := s.rdb.HMGet(ctx, s.keys.Saga(orderID, tr), "status", "reason").Result()
	if err != nil {
		return "", "", err
	}
	status, _ = v[0].(string)
	reason, _ = v[1].(string)
	return status, reason, nil
}

// WithHistory has Timeline read expired attempts from ch.
func (s *Flow) WithHistory(ch *clickhouse.Client) { s.ch = ch }
