package collector

import (
	"crypto/rand"
	"time"
)

// crockford is the Crockford base32 alphabet of ULIDs.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewRunID returns a unique, time-ordered ULID: 48 bits of Unix
// milliseconds of at, then 80 random bits, in Crockford base32.
func NewRunID(at time.Time) string {
	var b [16]byte
	ms := uint64(max(at.UnixMilli(), 0))
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:]) // never fails (crypto/rand)
	return encodeULID(b)
}

// encodeULID encodes 128 bits as 26 base32 characters, 5 bits each from the
// most significant (the first character carries the top 3 bits).
func encodeULID(b [16]byte) string {
	var out [26]byte
	// Treat b as a 130-bit number with two leading zero bits.
	var acc uint32
	bits := 2 // leading zero bits already "in" acc
	j := 0
	for _, x := range b {
		acc = acc<<8 | uint32(x)
		bits += 8
		for bits >= 5 {
			bits -= 5
			out[j] = crockford[(acc>>uint(bits))&31]
			j++
		}
	}
	return string(out[:j])
}
