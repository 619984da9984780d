package checkoutbench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/flows/checkout"
)

// checkChunk is how many reads go in one pipeline.
const checkChunk = 2000

// maxListed bounds the inconsistencies listed.
const maxListed = 20

// check compares the answers with Redis: an order answered 200 is paid,
// one answered 400 or never checked out is not, and the stock and credit
// taken equal what the paid orders hold. Other answers (5xx) are reported,
// not checked.
func (b *bench) check(ctx context.Context) ([]string, int, error) {
	keys := b.svc.Store().Keys()
	var out []string
	report := func(format string, args ...any) {
		if len(out) < maxListed {
			out = append(out, fmt.Sprintf(format, args...))
		} else if len(out) == maxListed {
			out = append(out, "…")
		}
	}
	takenStock := make([]int64, b.cfg.Items)
	takenCredit := make([]int64, b.cfg.Users)
	pending := 0
	for start := 0; start < b.cfg.Orders; start += checkChunk {
		pipe := b.rdb.Pipeline()
		cmds := make([]*redis.SliceCmd, 0, checkChunk)
		for i := start; i < min(b.cfg.Orders, start+checkChunk); i++ {
			cmds = append(cmds, pipe.HMGet(ctx, keys.Order(strconv.Itoa(i)), "paid", "items", "total_cost", "user_id", "status"))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, 0, fmt.Errorf("checkoutbench: read orders: %w", err)
		}
		for j, c := range cmds {
			i := start + j
			v := c.Val()
			paid := v[0] == "1"
			code, asked := b.answer[i]
			switch {
			case code == http.StatusOK && !paid:
				report("order %d answered 200 but is not paid", i)
			case (code == http.StatusBadRequest || !asked) && paid:
				report("order %d answered %d (asked %v) but is paid", i, code, asked)
			case asked && code != http.StatusOK && code != http.StatusBadRequest:
				pending++
			}
			if !paid {
				continue
			}
			s, _ := v[1].(string)
			total, _ := strconv.ParseInt(fmt.Sprint(v[2]), 10, 64)
			user, _ := strconv.Atoi(fmt.Sprint(v[3]))
			if user >= 0 && user < len(takenCredit) {
				takenCredit[user] += total
			}
			lines, err := checkout.ParseLines(s)
			if err != nil {
				report("order %d: %v", i, err)
				continue
			}
			for _, l := range lines {
				if n, err := strconv.Atoi(l.ID); err == nil && n >= 0 && n < len(takenStock) {
					takenStock[n] += l.Amount
				}
			}
		}
	}
	if pending > 0 {
		report("%d checkouts answered neither 200 nor 400 (not checked against their orders)", pending)
	}
	if err := b.compare(ctx, "item", "stock", b.cfg.Stock, takenStock, keys.Item, report); err != nil {
		return nil, 0, err
	}
	if err := b.compare(ctx, "user", "credit", b.cfg.Credit, takenCredit, keys.User, report); err != nil {
		return nil, 0, err
	}
	return out, b.cfg.Orders, nil
}

// compare checks start − current = taken for every entity.
func (b *bench) compare(ctx context.Context, noun, field string, start int64, taken []int64, key func(string) string, report func(string, ...any)) error {
	for from := 0; from < len(taken); from += checkChunk {
		pipe := b.rdb.Pipeline()
		cmds := make([]*redis.StringCmd, 0, checkChunk)
		for i := from; i < min(len(taken), from+checkChunk); i++ {
			cmds = append(cmds, pipe.HGet(ctx, key(strconv.Itoa(i)), field))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("checkoutbench: read %s: %w", field, err)
		}
		for j, c := range cmds {
			n, _ := c.Int64()
			if got := start - n; got != taken[from+j] {
				report("%s %d: %d %s taken, paid orders hold %d", noun, from+j, got, field, taken[from+j])
			}
		}
	}
	return nil
}
