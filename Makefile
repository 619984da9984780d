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

.PHONY: all test vet lint bench faults demo build

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

# The full fault matrix of the checkout contract's linearizability (about 10 minutes);
# `make test` runs its combined schedule only.
faults:
	DROPSTREAM_FULL_MATRIX=1 $(TESTENV) $(GO) test -race -count=1 -timeout 40m -v -run TestCheckout_LinearizableFaultMatrix ./e2e/

demo:
	$(GO) run ./cmd/dropstream demo

build:
	$(GO) build -o bin/dropstream ./cmd/dropstream
