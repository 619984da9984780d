package comic

import (
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
)

// KindNotify is the stored kind of comic POST /notify destinations.
const KindNotify = "comic_notify"

// NotifyKind is the comic_notify kind: signed JSON (NotifyBody) to an
// http(s) endpoint over the webhook channel.
func NotifyKind() subscriber.Kind { return notifier.SignedJSONKind(KindNotify) }
