package feed

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // WebSub hubs may sign with sha1; sha256 and sha512 too
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/dropstream/dropstream/flows/feed/poll"
	"github.com/dropstream/dropstream/internal/egress"
	"github.com/dropstream/dropstream/internal/recordstore"
	"github.com/dropstream/dropstream/internal/settings"
	"github.com/dropstream/dropstream/stream"
)

// WebSubPath is the path of the WebSub callbacks: WebSubPath + feed id.
const WebSubPath = "/v1/websub/"

// WebSub subscription states.
const (
	WebSubPending = "pending" // asked of the hub, not verified yet
	WebSubActive  = "active"  // verified: content is pushed until it expires
	WebSubDenied  = "denied"  // the hub refused it
)

// Errors of the WebSub callback, for errors.Is.
var (
	// ErrBadSignature: a push without a valid X-Hub-Signature.
	ErrBadSignature = errors.New("feed: websub: bad signature")
	// ErrTooLarge: a pushed body above WebSubConfig.MaxBodyBytes.
	ErrTooLarge = errors.New("feed: websub: body too large")
)

// WebSubConfig configures subscribing to the feeds' WebSub hubs and taking
// their pushes. Zero fields take their defaults.
type WebSubConfig struct {
	// Disabled turns subscribing off (feeds are only polled). The callback
	// must be reachable by hubs at Config.PublicURL + WebSubPath.
	Disabled bool
	// Lease is the lease asked of hubs. Default 10 days.
	Lease time.Duration `default:"240h" range:"1m..8760h"`
	// RenewBefore renews a lease this long before expiry (at most half of
	// it). Default 1h.
	RenewBefore time.Duration `default:"1h" range:"1s.."`
	// Fallback is how often a pushed feed is still polled. Default 6h.
	Fallback time.Duration `default:"6h" range:"1m..720h"`
	// Retry is the wait before re-asking after an unverified or denied
	// request. Default 15m.
	Retry time.Duration `default:"15m" range:"1s.."`
	// MaxBodyBytes bounds a pushed body. Default 1 MiB.
	MaxBodyBytes int `default:"1MiB" range:"1KiB..16MiB"`
	// Timeout bounds a subscription request to a hub. Default 10s.
	Timeout time.Duration `default:"10s" range:"10ms..1m"`
}

// WithDefaults returns c with every zero field set to its default.
func (c WebSubConfig) WithDefaults() WebSubConfig {
	settings.Defaults(&c)
	return c
}

// Validate reports every invalid field of a defaulted config.
func (c WebSubConfig) Validate() error {
	return settings.Check("feed websub", &c)
}

// webSub is a feed's subscription at a hub, in ds:{feeds}:websub.
type webSub struct {
	Hub   string `json:"hub"`
	Topic string `json:"topic"`
	// Secret is the HMAC key the hub signs pushes with (hub.secret).
	Secret string `json:"secret"`
	// Token is the callback URL's last segment, kept across renewals;
	// every verification and push must present it.
	Token       string    `json:"token,omitempty"`
	State       string    `json:"state"`
	RequestedAt time.Time `json:"requested_at"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
	// Pending is the last request the hub has not verified yet, or nil.
	Pending *webSubRequest `json:"pending,omitempty"`
}

// webSubRequest is a (re)subscription asked of a hub, open to a matching
// verification until it expires.
type webSubRequest struct {
	Mode      string    `json:"mode"`
	Hub       string    `json:"hub"`
	Topic     string    `json:"topic"`
	Token     string    `json:"token"`
	Secret    string    `json:"secret"`
	ExpiresAt time.Time `json:"expires_at"`
}

// open reports whether a verification (mode, topic, token) answers r at now.
func (r *webSubRequest) open(mode, topic, token string, now time.Time) bool {
	return r != nil && now.Before(r.ExpiresAt) && r.Mode == mode && r.Topic == topic && sameSecret(r.Token, token)
}

// sameSecret compares secrets in constant time; an empty stored one
// matches nothing.
func sameSecret(stored, presented string) bool {
	return stored != "" && subtle.ConstantTimeCompare([]byte(stored), []byte(presented)) == 1
}

// WebSubView is a feed's WebSub subscription as the API shows it, secretless.
type WebSubView struct {
	Hub         string     `json:"hub"`
	Topic       string     `json:"topic"`
	State       string     `json:"state"`
	RequestedAt time.Time  `json:"requested_at"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
}

// pushed reports whether the feed is pushed at now (a token is required).
func (w webSub) pushed(now time.Time) bool {
	return w.State == WebSubActive && w.Token != "" && now.Before(w.ExpiresAt)
}

func (f *Flow) webSub(ctx context.Context, id string) (webSub, bool, error) {
	w, err := recordstore.InHash[webSub](f.rdb, defsKey("websub")).Get(ctx, id)
	switch {
	case errors.Is(err, recordstore.ErrNotFound) || errors.Is(err, recordstore.ErrCorrupt):
		return webSub{}, false, nil
	case err != nil:
		return webSub{}, false, fmt.Errorf("feed: websub of %s: %w", id, err)
	}
	return w, true, nil
}

// ensureWebSub subscribes a feed at its first hub unless it is active and
// not due, or was asked less than Retry ago.
func (f *Flow) ensureWebSub(ctx context.Context, fd Feed, hints poll.Hints, now time.Time) error {
	if f.cfg.WebSub.Disabled || len(hints.Hubs) == 0 {
		return nil
	}
	hub, topic := hints.Hubs[0], hints.Self
	topic = cmp.Or(topic, fd.URL)
	w, ok, err := f.webSub(ctx, fd.ID)
	if err != nil {
		return err
	}
	if ok && w.Hub == hub && w.Topic == topic {
		switch {
		case w.pushed(now) && now.Before(f.renewAt(w)):
			return nil
		case !w.pushed(now) && now.Sub(w.RequestedAt) < f.cfg.WebSub.Retry:
			return nil
		}
	}
	return f.subscribeHub(ctx, fd.ID, hub, topic, now)
}

// renewAt is when an active subscription is renewed.
func (f *Flow) renewAt(w webSub) time.Time {
	lease := w.ExpiresAt.Sub(w.RequestedAt)
	return w.ExpiresAt.Add(-min(f.cfg.WebSub.RenewBefore, lease/2))
}

// subscribeHub asks hub to push topic to the feed's callback, stored as
// pending first; a renewal keeps the callback and secret.
func (f *Flow) subscribeHub(ctx context.Context, feedID, hub, topic string, now time.Time) error {
	if err := f.cfg.Egress.CheckURL(hub); err != nil {
		return fmt.Errorf("feed: websub hub: %w", err)
	}
	old, ok, err := f.webSub(ctx, feedID)
	if err != nil {
		return err
	}
	now = now.UTC().Truncate(time.Millisecond)
	w := webSub{Hub: hub, Topic: topic, State: WebSubPending, RequestedAt: now}
	req := webSubRequest{Mode: "subscribe", Hub: hub, Topic: topic, Token: randomHex(32), Secret: randomHex(32),
		ExpiresAt: now.Add(f.cfg.WebSub.Retry)}
	if ok && old.pushed(now) && old.Hub == hub && old.Topic == topic {
		w, req.Token, req.Secret = old, old.Token, old.Secret
		w.RequestedAt = now
	}
	w.Pending = &req
	if err := recordstore.InHash[webSub](f.rdb, defsKey("websub")).Put(ctx, feedID, w); err != nil {
		return err
	}
	form := url.Values{"hub.mode": {req.Mode}, "hub.topic": {topic}, "hub.callback": {f.cfg.PublicURL + WebSubPath + feedID + "/" + req.Token},
		"hub.secret": {req.Secret}, "hub.lease_seconds": {strconv.Itoa(int(f.cfg.WebSub.Lease.Seconds()))}}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.WebSub.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, hub, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("feed: websub request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := f.hubClient.Do(hreq)
	if err != nil {
		return fmt.Errorf("feed: websub subscribe at %s: %s", clip(hub, 256), egress.Describe(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("feed: websub subscribe at %s: %w", clip(hub, 256), egress.Status(resp.StatusCode))
	}
	f.websubEvents.Add(ctx, 1, metric.WithAttributeSet(attrSet("event", "subscribe")))
	return nil
}

// VerifyWebSub answers a hub's verification of intent: a "subscribe"
// matching the pending request activates it, a "denied" ends it, and
// anything else is ErrNotFound.
func (f *Flow) VerifyWebSub(ctx context.Context, feedID, token, mode, topic string, leaseSeconds int) error {
	w, ok, err := f.webSub(ctx, feedID)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotFound
	}
	now := f.cfg.Now().UTC().Truncate(time.Millisecond)
	switch mode {
	case "subscribe":
		p := w.Pending
		if !p.open(mode, topic, token, now) {
			return ErrNotFound
		}
		lease := f.cfg.WebSub.Lease
		if leaseSeconds > 0 {
			lease = min(time.Duration(leaseSeconds)*time.Second, f.cfg.WebSub.Lease)
		}
		w = webSub{Hub: p.Hub, Topic: p.Topic, Secret: p.Secret, Token: p.Token, State: WebSubActive,
			RequestedAt: now, ExpiresAt: now.Add(lease)}
		f.websubEvents.Add(ctx, 1, metric.WithAttributeSet(attrSet("event", "verified")))
	case "denied":
		switch {
		case w.Pending.open("subscribe", topic, token, now) && !w.pushed(now):
		case w.pushed(now) && w.Topic == topic && sameSecret(w.Token, token):
		default:
			return ErrNotFound
		}
		w.State, w.ExpiresAt, w.Pending = WebSubDenied, time.Time{}, nil
		f.websubEvents.Add(ctx, 1, metric.WithAttributeSet(attrSet("event", "denied")))
	default:
		return ErrNotFound
	}
	return recordstore.InHash[webSub](f.rdb, defsKey("websub")).Put(ctx, feedID, w)
}

// Push checks a hub push's X-Hub-Signature and publishes it as a Poll.
// Errors: ErrNotFound, ErrBadSignature, ErrInvalid.
func (f *Flow) Push(ctx context.Context, feedID, token string, body []byte, signature string) error {
	w, ok, err := f.webSub(ctx, feedID)
	if err != nil {
		return err
	}
	if !ok || w.State != WebSubActive || !sameSecret(w.Token, token) {
		return ErrNotFound
	}
	if len(body) > f.cfg.WebSub.MaxBodyBytes {
		f.websubEvents.Add(ctx, 1, metric.WithAttributeSet(attrSet("event", "rejected")))
		return fmt.Errorf("%w: over %d bytes", ErrTooLarge, f.cfg.WebSub.MaxBodyBytes)
	}
	if !validSignature(w.Secret, body, signature) {
		f.websubEvents.Add(ctx, 1, metric.WithAttributeSet(attrSet("event", "rejected")))
		return ErrBadSignature
	}
	parsed, err := poll.Parse(body)
	if err != nil {
		f.websubEvents.Add(ctx, 1, metric.WithAttributeSet(attrSet("event", "rejected")))
		return fmt.Errorf("%w push: %w", ErrInvalid, err)
	}
	p := Poll{FeedID: feedID, PolledAtMs: f.cfg.Now().UnixMilli(), OK: true, Push: true, Items: parsed.Items,
		MissingGUIDs: parsed.MissingGUIDs, DuplicateGUIDs: parsed.DuplicateGUIDs}
	b, _ := json.Marshal(p)
	if err := f.pub.Publish(ctx, f.topics.Polls, stream.NewMessage(feedID, TypePoll, b)); err != nil {
		return fmt.Errorf("feed: publish push of %s: %w", feedID, err)
	}
	f.websubEvents.Add(ctx, 1, metric.WithAttributeSet(attrSet("event", "pushed")))
	f.requests.Add(ctx, 1, metric.WithAttributeSet(outcomeSets["push"]))
	f.bytes.Add(ctx, int64(len(body)))
	_ = f.rdb.HIncrBy(ctx, statsKey(feedID), "pushes", 1).Err()
	return nil
}

// signatureHashes are the X-Hub-Signature algorithms taken, by name.
var signatureHashes = map[string]func() hash.Hash{"sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New}

// validSignature checks an X-Hub-Signature header against body.
func validSignature(secret string, body []byte, header string) bool {
	algo, sig, ok := strings.Cut(strings.TrimSpace(header), "=")
	mk, known := signatureHashes[strings.ToLower(algo)]
	if !ok || !known || secret == "" {
		return false
	}
	want, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	m := hmac.New(mk, []byte(secret))
	m.Write(body)
	return hmac.Equal(m.Sum(nil), want)
}

// RenewWebSub renews every active subscription due at now, one copy each
// through the websub gate, and returns how many it asked for.
func (p *Poller) RenewWebSub(ctx context.Context) (int, error) {
	f := p.flow
	if f.cfg.WebSub.Disabled {
		return 0, nil
	}
	all, err := f.rdb.HGetAll(ctx, defsKey("websub")).Result()
	if err != nil {
		return 0, fmt.Errorf("feed: websub subscriptions: %w", err)
	}
	now, n := p.cfg.Now(), 0
	var errs []error
	for id, raw := range all {
		var w webSub
		if json.Unmarshal([]byte(raw), &w) != nil || !w.pushed(now) || now.Before(f.renewAt(w)) {
			continue
		}
		ok, _, err := p.gate.Take(ctx, f.topics.feedPrefix(id)+"websub", f.cfg.WebSub.Retry)
		if err != nil || !ok {
			errs = append(errs, err)
			continue
		}
		if err := f.subscribeHub(ctx, id, w.Hub, w.Topic, now); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
