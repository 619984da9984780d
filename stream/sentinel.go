package stream

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

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
