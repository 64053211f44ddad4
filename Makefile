# perfscope build. `make` builds the static binary; `make generate` rebuilds
# the BPF objects (needs clang, llvm and libbpf-dev); `make test` runs every
# tier of tests (root tests need root).
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/perfscope/perfscope/internal/cli.version=$(VERSION)

.PHONY: all build generate test test-unit test-root vet fmt check-generated bench docker clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o perfscope ./cmd/perfscope

generate:
	$(GO) generate ./probes/...

vet:
	$(GO) vet ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Regenerate the committed BPF objects and fail if they differ.
check-generated: generate
	@git diff --exit-code -- probes || (echo "generated BPF files differ from the committed ones: run make generate and commit"; exit 1)

test:
	$(GO) test ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./bench/

docker:
	docker build -t perfscope:$(VERSION) .

clean:
	rm -f perfscope
