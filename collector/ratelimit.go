package collector

import (
	"net/url"
)

// bucketKey is the politeness domain of a source: its provider and its
// base URL's host. Sources of one domain share one ratelimit.Bucket.
func bucketKey(src Source) string {
	host := src.BaseURL
	if u, err := url.Parse(src.BaseURL); err == nil {
		host = u.Host
	}
	return src.Provider + " " + host
}
