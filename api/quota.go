package api

import "net/http"

// QuotaExceeded returns the 409 "quota_exceeded" *Error of a create that
// would take the caller (see [Caller]) beyond its cap of stored objects of
// a kind; msg names the kind and the cap.
func QuotaExceeded(msg string) *Error {
	return NewError(http.StatusConflict, "quota_exceeded", msg)
}
