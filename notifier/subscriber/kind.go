package subscriber

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/dropstream/dropstream/internal/clip"
)

// Kind is a kind of destination: how its address is checked, whether it
// has a secret, which channel sends to it. Built in: email, webhook, slack;
// flows add theirs with notifier.Flow.RegisterKind.
type Kind struct {
	// Name is the stored value of Destination.Kind; it never changes.
	Name string
	// Channel names the notifier channel that delivers to the kind.
	Channel string
	// Core checks an address and returns its unique identity; errors wrap
	// ErrInvalid. See EmailCore and URLCore.
	Core func(address string) (string, error)
	// Secret says destinations carry a signing secret (generated if absent).
	Secret bool
}

// The built-in destination kinds.
const (
	// KindEmail is an email address, delivered over SMTP.
	KindEmail = "email"
	// KindWebhook is an http(s) URL receiving signed JSON.
	KindWebhook = "webhook"
	// KindSlack is a Slack-style incoming webhook URL receiving {"text": …}.
	KindSlack = "slack"
)

// kinds is the registry of destination kinds, in registration order.
var kinds = struct {
	sync.RWMutex
	list []Kind
}{list: []Kind{
	{Name: KindEmail, Channel: "email", Core: EmailCore},
	{Name: KindWebhook, Channel: "webhook", Core: URLCore, Secret: true},
	{Name: KindSlack, Channel: "slack", Core: URLCore, Secret: true},
}}

// RegisterKind adds a destination kind process-wide. Registering the same
// definition again does nothing; another under a taken name is an error.
func RegisterKind(k Kind) error {
	if k.Name == "" || len(k.Name) > 64 || !printable(k.Name) || k.Channel == "" || k.Core == nil {
		return fmt.Errorf("subscriber: kind %q needs a name of 1-64 bytes, a channel and a Core", clip.Marked(k.Name, maxQuoted))
	}
	kinds.Lock()
	defer kinds.Unlock()
	for _, o := range kinds.list {
		if o.Name != k.Name {
			continue
		}
		if o.Channel == k.Channel && o.Secret == k.Secret && reflect.ValueOf(o.Core).Pointer() == reflect.ValueOf(k.Core).Pointer() {
			return nil
		}
		return fmt.Errorf("subscriber: kind %q registered twice, differently", k.Name)
	}
	kinds.list = append(kinds.list, k)
	return nil
}

// LookupKind returns the registered kind named name.
func LookupKind(name string) (Kind, bool) {
	kinds.RLock()
	defer kinds.RUnlock()
	for _, k := range kinds.list {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// Kinds returns the registered kinds, in registration order.
func Kinds() []Kind {
	kinds.RLock()
	defer kinds.RUnlock()
	return append([]Kind(nil), kinds.list...)
}

// errUnknownKind lists the registered kinds.
func errUnknownKind(name string) error {
	all := Kinds()
	names := make([]string, len(all))
	for i, k := range all {
		names[i] = k.Name
	}
	want := names[len(names)-1]
	if len(names) > 1 {
		want = strings.Join(names[:len(names)-1], ", ") + " or " + want
	}
	return fmt.Errorf("%w: destination kind %q: want %s", ErrInvalid, clip.Marked(name, maxQuoted), want)
}

// EmailCore is "email:" + the address lower-cased.
func EmailCore(address string) (string, error) {
	addr, err := normalizeEmail(address)
	if err != nil {
		return "", err
	}
	return "email:" + addr, nil
}

// URLCore is "url:" + the http(s) URL normalized (scheme and host
// lower-cased; default port, fragment, trailing slash dropped). Every URL
// kind shares it, so an endpoint is subscribed once.
func URLCore(address string) (string, error) {
	u, err := normalizeURL(address)
	if err != nil {
		return "", err
	}
	return "url:" + u, nil
}

// errNoSecret is the error of a secret given to a kind that takes none.
func errNoSecret(kind string) error {
	article := "a"
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		article = "an"
	}
	return fmt.Errorf("%w: %s %s destination takes no secret", ErrInvalid, article, clip.Marked(kind, maxQuoted))
}
