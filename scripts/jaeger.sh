#!/usr/bin/env bash
# jaeger.sh — print the path of a Jaeger v2 binary, building it first if needed.
#
# Usage: scripts/jaeger.sh            (prints the binary's absolute path)
#
# Jaeger comes from the Go module proxy: the module is downloaded, copied to a
# writable directory and built there with `go build ./cmd/jaeger` (building
# inside its own module applies its replace directives, which `go install`
# refuses). The binary is cached per version under the Go build cache
# (`go env GOCACHE`/dropstream-tools), so later runs start at once. Progress
# goes to stderr. Tunables: JAEGER_VERSION (default v1.76.0, the module tag
# of Jaeger 2.13.0, the image compose.yaml runs).
#
# compose image: jaegertracing/jaeger:2.13.0
set -euo pipefail

VERSION="${JAEGER_VERSION:-v1.76.0}"
CACHE="$(go env GOCACHE)/dropstream-tools"
BIN="$CACHE/jaeger-$VERSION"

if [ -x "$BIN" ]; then
	echo "$BIN"
	exit 0
fi

log() { printf 'jaeger.sh: %s\n' "$*" >&2; }
mkdir -p "$CACHE"
# One build at a time: concurrent test runs wait for the first build instead
# of each compiling Jaeger again.
exec 9>"$CACHE/jaeger-$VERSION.lock"
flock 9
if [ -x "$BIN" ]; then
	echo "$BIN"
	exit 0
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/dropstream-jaeger.XXXXXX")"
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT

log "downloading github.com/jaegertracing/jaeger@$VERSION"
DIR="$(go mod download -json "github.com/jaegertracing/jaeger@$VERSION" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -n "$DIR" ] && [ -d "$DIR" ] || { log "error: module directory not found"; exit 1; }
cp -r "$DIR" "$WORK/src"
chmod -R u+w "$WORK/src"
log "building jaeger $VERSION (takes a few minutes once; cached in $CACHE)"
start=$(date +%s)
(cd "$WORK/src" && GOFLAGS=-mod=mod go build -trimpath -o "$WORK/jaeger" ./cmd/jaeger)
mv "$WORK/jaeger" "$BIN"
log "built in $(($(date +%s) - start)) s"
echo "$BIN"
