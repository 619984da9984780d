package comic

import (
	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
)

// KindNotify is the destination kind of a comic POST /notify endpoint,
// "comic_notify": the Kind stored with every such destination, so it never
// changes.
const KindNotify = "comic_notify"

// NotifyKind is the comic_notify destination kind: an http(s) endpoint that
// receives the notifier's signed JSON Message (payload NotifyBody) over the
// webhook channel, with a "url:" core like a webhook's.
func NotifyKind() subscriber.Kind { return notifier.SignedJSONKind(KindNotify) }
