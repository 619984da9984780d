package feed

import (
	"encoding/json"
	"net/mail"
	"time"

	"github.com/dropstream/dropstream/notifier"
	"github.com/dropstream/dropstream/notifier/subscriber"
)

// relayItems bounds the items listed in a relayed request's payload, so a
// request stays within notifier.MaxRequestBytes; the text lists them all
// up to notifier.MaxTextLen.
const relayItems = 100

// relayRequest turns a rendered message into a notification request to the
// subscription's destination, inline (the subscription's confirmation is
// the flow's own, by its confirm link). The request's business key in the
// notifier is (destination, subject "feed:<feed>/<subscribable>", window):
// one delivery per collection and destination.
func relayRequest(sub Subscription, window, eventID string, msg Message, observed time.Time, traceID string) notifier.Request {
	addr := sub.Destination.Address
	if a, err := mail.ParseAddress(addr); err == nil {
		addr = a.Address // the notifier takes bare addresses
	}
	dest := subscriber.Destination{Kind: subscriber.KindEmail, Address: addr}
	if sub.Destination.Kind == DestWebhook {
		dest = subscriber.Destination{Kind: subscriber.KindWebhook, Address: sub.Destination.URL, Secret: sub.Secret}
	}
	compact := msg
	compact.HTML, compact.Text = "", ""
	compact.Items = nil
	for i, it := range msg.Items {
		if i == relayItems {
			break
		}
		it.Description = ""
		compact.Items = append(compact.Items, it)
	}
	payload, _ := json.Marshal(compact)
	if len(payload) > notifier.MaxRequestBytes/2 {
		compact.Items = nil
		payload, _ = json.Marshal(compact)
	}
	return notifier.Request{Flow: FlowName, Event: "feed." + msg.Kind, Subject: clip("feed:"+msg.FeedID+"/"+msg.Subscribable, notifier.MaxSubjectLen),
		Destination: &dest, Window: clip(window, notifier.MaxWindowLen), Critical: true, Title: clip(msg.Subject, notifier.MaxTextLen),
		Text: clip(msg.Text, notifier.MaxTextLen), Payload: payload, ObservedAt: observed, TraceID: traceID, EventID: clip(eventID, 128)}
}
