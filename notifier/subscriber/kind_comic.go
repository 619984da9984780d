package subscriber

// KindComic is the comic flow's POST /notify endpoint: signed JSON over the
// webhook channel, its core a "url:" one like a webhook's.
//
// The comic flow owns this kind. It is registered here only until the comic
// flow registers it itself when it is built, with
// nf.RegisterKind(notifier.SignedJSONKind(KindComic)) on the notifier it
// finds (flow.Find), and keeps the constant; this file then goes. The
// definitions are the same, so registering it there too meanwhile is
// harmless.
const KindComic = "comic_notify"

func init() {
	if err := RegisterKind(Kind{Name: KindComic, Channel: "webhook", Core: URLCore, Secret: true}); err != nil {
		panic(err)
	}
}
