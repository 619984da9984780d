package checkout

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/stream"
)

// Errors of the store and checkouts; the HTTP API answers them with 400.
var (
	ErrNotFound       = errors.New("not found")       // no item, user or order with that id.
	ErrInsufficient   = errors.New("insufficient")    // stock or credit would go below zero.
	ErrInvalid        = errors.New("invalid")         // a malformed id or an amount out of range.
	ErrConflict       = errors.New("conflict")        // the order is paid, or a checkout of it is running.
	ErrCheckoutFailed = errors.New("checkout failed") // the saga failed and was compensated.
)

// Store keeps items, users and orders as Redis hashes in their id's
// partition, retrying an unreachable Redis for Config.RetryFor.
type Store struct {
	rdb      redis.UniversalClient
	keys     Keys
	retryFor time.Duration
	wait     stream.ReplicaWait
}

// retry runs op again while Redis is unavailable, for up to s.retryFor.
func retry[T any](ctx context.Context, s *Store, op func() (T, error)) (T, error) {
	return stream.RetryUnavailable(ctx, s.retryFor, op)
}

// retryErr is retry of an op without a result.
func (s *Store) retryErr(ctx context.Context, op func() error) error {
	_, err := retry(ctx, s, func() (struct{}, error) { return struct{}{}, op() })
	return err
}

// write runs queue's idempotent writes in one pipeline with the replica wait, retried.
func (s *Store) write(ctx context.Context, queue func(redis.Pipeliner)) error {
	return s.retryErr(ctx, func() error { return s.wait.Exec(ctx, s.rdb, queue) })
}

// confirm waits until the replicas hold every write so far.
func (s *Store) confirm(ctx context.Context) error {
	return s.retryErr(ctx, func() error { return s.wait.Confirm(ctx, s.rdb) })
}

// callTTL keeps a call's outcome past every try of the call.
func (s *Store) callTTL() string {
	return strconv.FormatInt((s.retryFor + time.Minute).Milliseconds(), 10)
}

// Keys returns the store's key names.
func (s *Store) Keys() Keys { return s.keys }

// Order is an order as the API shows it.
type Order struct {
	ID        string
	UserID    string
	Paid      bool
	Lines     []Line
	TotalCost int64
	TrNum     int64  // the last attempt (0: none)
	Status    string // the last attempt's
	Ver       int64  // counts the changes of the order's items
}

func newID() string {
	var b [12]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func checkID(kind, id string) error {
	if !ValidID(id) {
		return fmt.Errorf("%w: %s id %q: want 1-%d characters of [A-Za-z0-9_-]", ErrInvalid, kind, id, MaxIDLen)
	}
	return nil
}

func checkRange(what string, v, lo, hi int64) error {
	if v < lo || v > hi {
		return fmt.Errorf("%w: %s %d out of range %d..%d", ErrInvalid, what, v, lo, hi)
	}
	return nil
}

// CreateItemOf creates an item of tenant (see Sees) with stock 0: its id.
func (s *Store) CreateItemOf(ctx context.Context, tenant string, price int64) (string, error) {
	if err := checkRange("price", price, 0, MaxPrice); err != nil {
		return "", err
	}
	id := NewIDOf(tenant)
	if err := s.write(ctx, func(p redis.Pipeliner) {
		p.HSet(ctx, s.keys.Item(id), "stock", 0, "price", price, "stocked", 0, "sold", 0)
	}); err != nil {
		return "", fmt.Errorf("checkout: create item: %w", err)
	}
	return id, nil
}

// FindItem returns an item's stock and price.
func (s *Store) FindItem(ctx context.Context, id string) (stock, price int64, err error) {
	if err := checkID("item", id); err != nil {
		return 0, 0, err
	}
	v, err := retry(ctx, s, func() ([]any, error) { return s.rdb.HMGet(ctx, s.keys.Item(id), "stock", "price").Result() })
	if err != nil {
		return 0, 0, fmt.Errorf("checkout: find item: %w", err)
	}
	if v[0] == nil || v[1] == nil {
		return 0, 0, fmt.Errorf("%w: item %s", ErrNotFound, id)
	}
	return intOf(v[0]), intOf(v[1]), nil
}

// AddStock adds amount to an item's stock and returns the new stock.
func (s *Store) AddStock(ctx context.Context, id string, amount int64) (int64, error) {
	return s.adjust(ctx, "item", id, "stock", amount, 1)
}

// SubtractStock takes amount from an item's stock; ErrInsufficient below zero.
func (s *Store) SubtractStock(ctx context.Context, id string, amount int64) (int64, error) {
	return s.adjust(ctx, "item", id, "stock", amount, -1)
}

// CreateUserOf creates a user of tenant (see Sees) with credit 0: its id.
func (s *Store) CreateUserOf(ctx context.Context, tenant string) (string, error) {
	id := NewIDOf(tenant)
	if err := s.write(ctx, func(p redis.Pipeliner) {
		p.HSet(ctx, s.keys.User(id), "credit", 0, "funded", 0, "charged", 0)
	}); err != nil {
		return "", fmt.Errorf("checkout: create user: %w", err)
	}
	return id, nil
}

// FindUser returns a user's credit.
func (s *Store) FindUser(ctx context.Context, id string) (int64, error) {
	if err := checkID("user", id); err != nil {
		return 0, err
	}
	credit, err := retry(ctx, s, func() (int64, error) { return s.rdb.HGet(ctx, s.keys.User(id), "credit").Int64() })
	if errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("%w: user %s", ErrNotFound, id)
	}
	if err != nil {
		return 0, fmt.Errorf("checkout: find user: %w", err)
	}
	return credit, nil
}

// AddFunds adds amount to a user's credit and returns the new credit.
func (s *Store) AddFunds(ctx context.Context, id string, amount int64) (int64, error) {
	return s.adjust(ctx, "user", id, "credit", amount, 1)
}

// Pay takes amount from a user's credit; ErrInsufficient below zero.
func (s *Store) Pay(ctx context.Context, id string, amount int64) (int64, error) {
	return s.adjust(ctx, "user", id, "credit", amount, -1)
}

// adjust changes field of id by sign × amount (0..MaxAmount).
func (s *Store) adjust(ctx context.Context, kind, id, field string, amount, sign int64) (int64, error) {
	if err := checkRange("amount", amount, 0, MaxAmount); err != nil {
		return 0, err
	}
	if err := checkID(kind, id); err != nil {
		return 0, err
	}
	delta := sign * amount
	keys := []string{s.keys.in(id, kind, id), s.keys.Call(id, newID())} // Item or User
	res, err := retry(ctx, s, func() ([]int64, error) {
		return s.wait.RunScript(ctx, s.rdb, adjustScript, keys, field, strconv.FormatInt(delta, 10), strconv.FormatInt(MaxAmount, 10), s.callTTL()).Int64Slice()
	})
	if err != nil {
		return 0, fmt.Errorf("checkout: change %s of %s %s: %w", field, kind, id, err)
	}
	switch res[0] {
	case 1:
		return 0, fmt.Errorf("%w: %s %s", ErrNotFound, kind, id)
	case 2:
		return 0, fmt.Errorf("%w %s for %s %s", ErrInsufficient, field, kind, id)
	case 3:
		return 0, fmt.Errorf("%w: %s of %s %s would exceed %d", ErrInvalid, field, kind, id, int64(MaxAmount))
	}
	return res[1], nil
}

// CreateOrder creates an empty order of an existing user, in its tenant.
func (s *Store) CreateOrder(ctx context.Context, userID string) (string, error) {
	if _, err := s.FindUser(ctx, userID); err != nil {
		return "", err
	}
	id := newID()
	if tag := idTag(userID); tag != "" {
		id = tag + "_" + id
	}
	if err := s.write(ctx, func(p redis.Pipeliner) {
		p.HSet(ctx, s.keys.Order(id), "user_id", userID, "paid", 0, "total_cost", 0, "items", "")
	}); err != nil {
		return "", fmt.Errorf("checkout: create order: %w", err)
	}
	return id, nil
}

// FindOrder returns an order.
func (s *Store) FindOrder(ctx context.Context, id string) (Order, error) {
	return retry(ctx, s, func() (Order, error) { return s.findOrder(ctx, id) })
}

// findOrder is FindOrder without retries.
func (s *Store) findOrder(ctx context.Context, id string) (Order, error) {
	if err := checkID("order", id); err != nil {
		return Order{}, err
	}
	m, err := s.rdb.HGetAll(ctx, s.keys.Order(id)).Result()
	if err != nil {
		return Order{}, fmt.Errorf("checkout: find order: %w", err)
	}
	return orderOf(id, m)
}

// orderOf reads an order hash; ErrNotFound when it is empty.
func orderOf(id string, m map[string]string) (Order, error) {
	if m["user_id"] == "" {
		return Order{}, fmt.Errorf("%w: order %s", ErrNotFound, id)
	}
	lines, err := ParseLines(m["items"])
	if err != nil {
		return Order{}, err
	}
	o := Order{ID: id, UserID: m["user_id"], Paid: m["paid"] == "1", Lines: lines, Status: m["status"]}
	o.TotalCost, _ = strconv.ParseInt(m["total_cost"], 10, 64)
	o.TrNum, _ = strconv.ParseInt(m["tr"], 10, 64)
	o.Ver, _ = strconv.ParseInt(m["ver"], 10, 64)
	return o, nil
}

// AddItem adds quantity of an item to an order and to its total cost;
// ErrConflict for a paid order or one being checked out.
func (s *Store) AddItem(ctx context.Context, orderID, itemID string, quantity int64) (int64, error) {
	if err := checkID("order", orderID); err != nil {
		return 0, err
	}
	if err := checkRange("quantity", quantity, 1, MaxQuantity); err != nil {
		return 0, err
	}
	_, price, err := s.FindItem(ctx, itemID)
	if err != nil {
		return 0, err
	}
	keys := []string{s.keys.Order(orderID), s.keys.Call(orderID, newID())}
	res, err := retry(ctx, s, func() ([]int64, error) {
		return s.wait.RunScript(ctx, s.rdb, addLineScript, keys, itemID, quantity, quantity*price, MaxLines, s.callTTL()).Int64Slice()
	})
	if err != nil {
		return 0, fmt.Errorf("checkout: add item: %w", err)
	}
	switch res[0] {
	case 1:
		return 0, fmt.Errorf("%w: order %s", ErrNotFound, orderID)
	case 2:
		return 0, fmt.Errorf("%w: order %s is paid", ErrConflict, orderID)
	case 3:
		return 0, fmt.Errorf("%w: order %s is being checked out", ErrConflict, orderID)
	case 4:
		return 0, fmt.Errorf("%w: order %s has %d item lines already", ErrInvalid, orderID, MaxLines)
	}
	return res[1], nil
}

// batchChunk is how many writes go in one pipeline of a batch_init.
const batchChunk = 1000

// batch writes n entities with set(pipe, i) in pipelined chunks.
func (s *Store) batch(ctx context.Context, what string, n int64, set func(redis.Pipeliner, int64)) error {
	if err := checkRange("n", n, 0, MaxBatch); err != nil {
		return err
	}
	for start := int64(0); start < n; start += batchChunk {
		pipe := s.rdb.Pipeline()
		for i := start; i < min(n, start+batchChunk); i++ {
			set(pipe, i)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("checkout: batch init %s: %w", what, err)
		}
	}
	if err := s.confirm(ctx); err != nil {
		return fmt.Errorf("checkout: batch init %s: %w", what, err)
	}
	return nil
}

// BatchInitItems creates or resets items "0".."n-1".
func (s *Store) BatchInitItems(ctx context.Context, n, stock, price int64) error {
	if err := errors.Join(checkRange("starting stock", stock, 0, MaxAmount), checkRange("price", price, 0, MaxPrice)); err != nil {
		return err
	}
	return s.batch(ctx, "items", n, func(p redis.Pipeliner, i int64) {
		p.HSet(ctx, s.keys.Item(strconv.FormatInt(i, 10)), "stock", stock, "price", price, "stocked", stock, "sold", 0)
	})
}

// BatchInitUsers creates or resets users "0".."n-1".
func (s *Store) BatchInitUsers(ctx context.Context, n, money int64) error {
	if err := checkRange("starting money", money, 0, MaxAmount); err != nil {
		return err
	}
	return s.batch(ctx, "users", n, func(p redis.Pipeliner, i int64) {
		p.HSet(ctx, s.keys.User(strconv.FormatInt(i, 10)), "credit", money, "funded", money, "charged", 0)
	})
}

// BatchInitOrders creates or resets orders "0".."n-1" (batch_init): a
// random user and two random items each, seeded by the id. A reset keeps
// the attempt number; do not reset orders being checked out.
func (s *Store) BatchInitOrders(ctx context.Context, n, nItems, nUsers, price int64) error {
	if err := errors.Join(checkRange("n_items", nItems, 1, MaxBatch), checkRange("n_users", nUsers, 1, MaxBatch),
		checkRange("item_price", price, 0, MaxPrice)); err != nil {
		return err
	}
	return s.batch(ctx, "orders", n, func(p redis.Pipeliner, i int64) {
		r := rand.New(rand.NewPCG(uint64(i), 0x0c0ffee))
		user := strconv.FormatInt(r.Int64N(nUsers), 10)
		a, b := strconv.FormatInt(r.Int64N(nItems), 10), strconv.FormatInt(r.Int64N(nItems), 10)
		key := s.keys.Order(strconv.FormatInt(i, 10))
		// Keep tr: old ledger entries must never match a new attempt.
		p.HDel(ctx, key, "status")
		p.HSet(ctx, key, "user_id", user, "paid", 0, "total_cost", 2*price, "items", a+":1,"+b+":1")
		p.HIncrBy(ctx, key, "ver", 1)
	})
}
