package comic

import (
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
)

// KindNotify is the destination kind of a comic POST /notify endpoint,
// "comic_notify": the Kind stored with every such destination, so it never
// changes.
const KindNotify = "comic_notify"

// NotifyKind is the comic_notify destination kind, which New registers on
// the notifier flow: an http(s) endpoint that receives the notifier's
// signed JSON Message by POST over the webhook channel, its payload a
// NotifyBody. Its destinations carry a signing secret (generated when the
// subscriber gives none), and its core is a "url:" one like a webhook's, so
// an endpoint is subscribed once whatever its kind.
func NotifyKind() subscriber.Kind { return notifier.SignedJSONKind(KindNotify) }
