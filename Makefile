# dropstream — developer entry points. Every target is phony; `make test` is what CI runs.
#
# Tunables (override on the command line, e.g. `make test GO_TEST_FLAGS='-count=1 ./stream/...'`):
#   GO            the go command
#   GO_TEST_FLAGS flags and packages for `go test` in `make test`
#   GO_BENCH_FLAGS flags and packages for `go test` in `make bench`
#   TESTENV       the wrapper that provides redis-server and clickhouse-server

GO             ?= go
TESTENV        ?= scripts/testenv.sh
GO_TEST_FLAGS  ?= -race -count=1 -timeout 20m ./...
GO_BENCH_FLAGS ?= -run '^$$' -bench . -benchtime 3s ./...

.PHONY: all test vet lint bench demo build

all: lint build

test:
	$(TESTENV) sh -c '$(GO) vet ./... && $(GO) tool staticcheck ./... && $(GO) test $(GO_TEST_FLAGS)'

vet:
	$(GO) vet ./...

lint:
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

bench:
	$(TESTENV) $(GO) test $(GO_BENCH_FLAGS)

demo:
	$(GO) run ./cmd/dropstream demo

build:
	$(GO) build -o bin/dropstream ./cmd/dropstream
