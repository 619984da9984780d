package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dropstream/dropstream/internal/bounds"
	"github.com/dropstream/dropstream/internal/script"
	"github.com/dropstream/dropstream/internal/tick"
)

// Dial connects to Redis: a redis:// or rediss:// URL for one server, a
// redis-sentinel:// URL for a primary behind Sentinels (ParseSentinelURL), or
// host:port,... for Redis Cluster. The pool fits a blocking reader per
// partition and stage.
func Dial(ctx context.Context, url string) (redis.UniversalClient, error) {
	var rdb redis.UniversalClient
	switch {
	case strings.HasPrefix(url, SentinelScheme+"://"):
		opt, err := ParseSentinelURL(url)
		if err != nil {
			return nil, err
		}
		opt.PoolSize = max(opt.PoolSize, 64)
		rdb = redis.NewFailoverClient(opt)
	case strings.Contains(url, "://"):
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("redis url: %w", err)
		}
		opt.PoolSize = max(opt.PoolSize, 64)
		rdb = redis.NewClient(opt)
	case url != "":
		addrs := strings.Split(url, ",")
		for i := range addrs {
			addrs[i] = strings.TrimSpace(addrs[i])
		}
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 64})
	default:
		return nil, fmt.Errorf("redis url is empty")
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis ping %s: %w", redactURL(url), err)
	}
	return rdb, nil
}

// redactURL returns u without its password and query (where a Sentinel's
// password may be).
func redactURL(u string) string {
	if q := strings.IndexByte(u, '?'); q >= 0 {
		u = u[:q]
	}
	at := strings.LastIndexByte(u, '@')
	scheme := strings.Index(u, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return u
	}
	return u[:scheme+3] + "***" + u[at:]
}

// Embedded is an in-process Redis (miniredis) for the embedded mode: one
// process, no persistence, every stream feature the runtime uses.
type Embedded struct {
	srv      *miniredis.Miniredis
	password string
	stop     context.CancelFunc
	done     chan struct{}
}

// Aging. TTLs count down in steps at least expiryTick apart. A step walks
// every key under the server's lock, so the next waits agingShare times as
// long as it took, at most maxAgingWait, well within a lease's renewal.
const (
	expiryTick   = 50 * time.Millisecond
	agingShare   = 50
	maxAgingWait = 2 * time.Second
)

// agingWait is the wait before the next step of aging after one that took
// took.
func agingWait(took time.Duration) time.Duration {
	return min(maxAgingWait, max(expiryTick, agingShare*took))
}

// StartEmbedded starts an in-process Redis on a free loopback port, its keys
// expiring on the wall clock (miniredis alone never ages them), behind a
// random 128-bit password new at each start ([Embedded.URL] carries it).
func StartEmbedded() (*Embedded, error) {
	var pw [16]byte
	if _, err := rand.Read(pw[:]); err != nil {
		return nil, fmt.Errorf("start embedded redis: password: %w", err)
	}
	srv := miniredis.NewMiniRedis()
	password := hex.EncodeToString(pw[:])
	srv.RequireAuth(password)
	if err := srv.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded redis: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	e := &Embedded{srv: srv, password: password, stop: stop, done: make(chan struct{})}
	go e.age(ctx)
	return e, nil
}

// age moves the server's clock with the wall clock until Close, one step
// every agingWait.
func (e *Embedded) age(ctx context.Context) {
	defer close(e.done)
	last := time.Now()
	for wait := expiryTick; tick.Sleep(ctx, wait) == nil; {
		// The step is timed from its own start, not from the timer's
		// firing: on a busy machine the goroutine runs late, and that
		// delay, multiplied, would freeze the clock for seconds.
		now := time.Now()
		e.srv.FastForward(now.Sub(last))
		last = now
		wait = agingWait(time.Since(now))
	}
}

// URL returns the redis:// URL of the embedded server, its password
// included: give it to the clients, never to a log.
func (e *Embedded) URL() string { return "redis://:" + e.password + "@" + e.srv.Addr() + "/0" }

// Addr returns the embedded server's host:port, without the password.
func (e *Embedded) Addr() string { return e.srv.Addr() }

// Close stops the embedded server; its data is gone.
func (e *Embedded) Close() {
	e.stop()
	<-e.done
	e.srv.Close()
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SentinelScheme is the scheme of a Redis URL that names a primary by its
// Sentinels (see ParseSentinelURL).
const SentinelScheme = "redis-sentinel"

// sentinelOwnParams are query parameters of go-redis's failover URL that a
// sentinel URL sets elsewhere (master_name, addr, username, password) or
// that would send writes or the runtime's reads to a replica.
var sentinelOwnParams = []string{"master_name", "addr", "username", "password",
	"replica_only", "route_by_latency", "route_randomly", "use_disconnected_replicas"}

// ParseSentinelURL reads
//
//	redis-sentinel://[[user]:password@]host:port[,host:port...]/master[?db=N&sentinel_password=...]
//
// into go-redis failover options: the Sentinels (at least one), the master
// name, and the servers' credentials as in a redis:// URL. The query may set
// db, sentinel_username, sentinel_password and go-redis's scalar options by
// snake-case name (pool_size, ...). Options routing commands to replicas are
// refused; TLS is not supported. Errors never contain a password.
func ParseSentinelURL(s string) (*redis.FailoverOptions, error) {
	rest, ok := strings.CutPrefix(s, SentinelScheme+"://")
	if !ok {
		return nil, fmt.Errorf("sentinel url: want %s://", SentinelScheme)
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	userinfo, hosts := "", authority
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo, hosts = authority[:at+1], authority[at+1:]
	}
	var addrs []string
	for i, h := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(strings.TrimSpace(h))
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("sentinel url: sentinel address %d: want host:port", i+1)
		}
		addrs = append(addrs, net.JoinHostPort(host, port))
	}
	// The addresses are checked: parse the rest with a plain host.
	u, err := url.Parse(SentinelScheme + "://" + userinfo + "sentinels" + rest[end:])
	if err != nil {
		return nil, urlError(err)
	}
	master := strings.Trim(u.Path, "/")
	if master == "" || strings.Contains(master, "/") {
		return nil, errors.New("sentinel url: want the master name as the path: /master")
	}
	q := u.Query()
	for _, p := range sentinelOwnParams {
		if q.Has(p) {
			return nil, fmt.Errorf("sentinel url: parameter %s not allowed (the master is the path, the Sentinels the host list, credentials the user-info; every command goes to the primary)", p)
		}
	}
	// go-redis's failover URL: the first Sentinel as host, the others as
	// addr parameters, the Sentinels' credentials as user-info.
	q.Set("master_name", master)
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	if u.User != nil {
		if name := u.User.Username(); name != "" {
			q.Set("username", name)
		}
		if pw, ok := u.User.Password(); ok {
			q.Set("password", pw)
		}
	}
	fu := url.URL{Scheme: "redis", Host: addrs[0], RawQuery: q.Encode()}
	if q.Has("sentinel_username") || q.Has("sentinel_password") {
		fu.User = url.UserPassword(q.Get("sentinel_username"), q.Get("sentinel_password"))
		q.Del("sentinel_username")
		q.Del("sentinel_password")
		fu.RawQuery = q.Encode()
	}
	opt, err := redis.ParseFailoverURL(fu.String())
	if err != nil {
		return nil, urlError(err)
	}
	return opt, nil
}

// urlError is a parse error of a sentinel URL, without the URL that
// url.Error quotes, password included.
func urlError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return fmt.Errorf("sentinel url: %w", err)
}

// ErrNotReplicated: a write was applied on the primary but fewer replicas
// than asked confirmed it in time. The caller must not answer success;
// IsUnavailable reports it (the API answers 503).
var ErrNotReplicated = errors.New("write not confirmed by enough replicas in time")

// Bounds of ReplicaWait.
const (
	// MaxWaitReplicas bounds ReplicaWait.Replicas.
	MaxWaitReplicas = 16
	// MaxWaitTimeout bounds ReplicaWait.Timeout: a WAIT sent in a
	// pipeline is read under the client's read timeout (3s by default).
	MaxWaitTimeout = 2 * time.Second
)

// fenceChannel is the channel of the fence a replica wait sends before its
// WAIT; nobody listens to it.
const fenceChannel = "dropstream:replication-fence"

// ReplicaWait makes a write a caller relies on wait until Replicas replicas
// hold it (Redis's WAIT), for at most Timeout, before the caller answers.
// The zero value waits for none: a failover may lose the last writes.
// WAIT goes on the write's connection, after a fence (a replicated PUBLISH)
// so that it also covers writes other connections made before. One primary
// only: on Redis Cluster WAIT covers one node, and Validate refuses it.
type ReplicaWait struct {
	// Replicas is how many replicas must confirm a write, at most
	// MaxWaitReplicas; 0 waits for none.
	Replicas int
	// Timeout bounds one wait: from 1ms to MaxWaitTimeout. A write not
	// confirmed by then fails with ErrNotReplicated.
	Timeout time.Duration
}

// ParseReplicaWait reads "off" (or "") — no wait, the default — or
// "REPLICAS/TIMEOUT", such as "1/500ms", and validates it.
func ParseReplicaWait(s string) (ReplicaWait, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "off" {
		return ReplicaWait{}, nil
	}
	n, d, ok := strings.Cut(s, "/")
	replicas, err := strconv.Atoi(n)
	if !ok || err != nil {
		return ReplicaWait{}, fmt.Errorf("redis wait %q: want off or REPLICAS/TIMEOUT, such as 1/500ms", s)
	}
	timeout, err := time.ParseDuration(d)
	if err != nil {
		return ReplicaWait{}, fmt.Errorf("redis wait %q: timeout: %w", s, err)
	}
	w := ReplicaWait{Replicas: replicas, Timeout: timeout}
	if replicas == 0 {
		return ReplicaWait{}, nil
	}
	return w, w.Validate()
}

// Validate checks the replicas, and the timeout of a wait that is on.
func (w ReplicaWait) Validate() error {
	errs := bounds.Check(nil, "redis wait: replicas", w.Replicas, 0, MaxWaitReplicas)
	if w.On() {
		errs = bounds.Check(errs, "redis wait: timeout", w.Timeout, time.Millisecond, MaxWaitTimeout)
	}
	return errors.Join(errs...)
}

// On reports whether writes wait for replicas.
func (w ReplicaWait) On() bool { return w.Replicas > 0 }

// String is the form ParseReplicaWait reads.
func (w ReplicaWait) String() string {
	if !w.On() {
		return "off"
	}
	return strconv.Itoa(w.Replicas) + "/" + w.Timeout.String()
}

// queue adds the fence and WAIT to pipe and returns WAIT's command, nil
// when w is off.
func (w ReplicaWait) queue(ctx context.Context, pipe redis.Pipeliner) *redis.Cmd {
	if !w.On() {
		return nil
	}
	pipe.Publish(ctx, fenceChannel, "")
	return pipe.Do(ctx, "wait", w.Replicas, w.Timeout.Milliseconds())
}

// check returns ErrNotReplicated when WAIT's command counted fewer
// replicas than asked, or the command's error.
func (w ReplicaWait) check(wait *redis.Cmd) error {
	if wait == nil {
		return nil
	}
	n, err := wait.Int64()
	if err != nil {
		return fmt.Errorf("redis wait: %w", err)
	}
	if n < int64(w.Replicas) {
		return fmt.Errorf("%w: %d of %d replicas within %s", ErrNotReplicated, n, w.Replicas, w.Timeout)
	}
	return nil
}

// Exec sends the commands queue adds in one pipeline, with the fence and
// WAIT when w is on; it returns the first failed command's error, else a
// wrapped ErrNotReplicated when too few replicas confirmed.
func (w ReplicaWait) Exec(ctx context.Context, rdb redis.UniversalClient, queue func(redis.Pipeliner)) error {
	pipe := rdb.Pipeline()
	queue(pipe)
	wait := w.queue(ctx, pipe)
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	return w.check(wait)
}

// Confirm waits until the replicas hold every write the primary ran before
// it, for an answer relying on other connections' writes; nil when w is off.
func (w ReplicaWait) Confirm(ctx context.Context, rdb redis.UniversalClient) error {
	if !w.On() {
		return nil
	}
	return w.Exec(ctx, rdb, func(redis.Pipeliner) {})
}

// RunScript runs one call of sc (as sc.Run) followed on the same connection
// by the fence and WAIT when w is on. Its error is the script's, else a
// wrapped ErrNotReplicated.
func (w ReplicaWait) RunScript(ctx context.Context, rdb redis.UniversalClient, sc *script.Script, keys []string, args ...any) *redis.Cmd {
	if !w.On() {
		return sc.Run(ctx, rdb, keys, args...)
	}
	pipe := rdb.Pipeline()
	cmd := sc.Queue(ctx, pipe, []script.Call{{Keys: keys, Args: args}})[0]
	wait := w.queue(ctx, pipe)
	_, _ = pipe.Exec(ctx) // errors are read per command
	var err error
	switch {
	case script.IsNoScript(cmd.Err()):
		// The call did nothing: run it alone, then confirm.
		if cmd = sc.Run(ctx, rdb, keys, args...); cmd.Err() == nil {
			err = w.Confirm(ctx, rdb)
		}
	case cmd.Err() == nil:
		err = w.check(wait)
	}
	if err != nil {
		cmd.SetErr(err)
	}
	return cmd
}
