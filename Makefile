# baton — make test runs everything CI runs; make demo runs the same-host demo.

GO      ?= go
PKGS    ?= ./...
# Test timeout per package; the whole suite runs in a few minutes.
TIMEOUT ?= 15m

.PHONY: test vet deps demo bench bench-full bench-compare build clean

# WORDPKGS also run without the race detector: on the futex mutex's word
# path the race build adds synchronization of its own (race.go), so the
# shipped build is tested as well.
WORDPKGS ?= . ./ipc ./local

test: deps vet
	$(GO) test -race -count=1 -timeout $(TIMEOUT) $(PKGS)
	$(GO) test -count=1 -timeout $(TIMEOUT) $(WORDPKGS)

vet:
	@fmt=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$fmt" ]; then echo "gofmt needed:"; echo "$$fmt"; exit 1; fi
	$(GO) vet $(PKGS)

# The Redis tests need redis-server and redis-cli; install them when missing.
deps:
	@if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then \
	  echo "installing redis-server"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server >/dev/null; \
	fi
	@redis-server --version
	@# PostgreSQL tests run initdb and postgres from /usr/lib/postgresql/*/bin.
	@if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && ! command -v postgres >/dev/null 2>&1; then \
	  echo "installing postgresql"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql >/dev/null; \
	fi

build:
	$(GO) build $(PKGS)

demo:
	$(GO) run ./examples/workers -n 4 -rounds 5

bench:
	cd bench && $(GO) run . -quick

bench-full:
	cd bench && $(GO) run . -full

# The quick pass on the working tree against a saved results file: BASE, by
# default bench/results.json as committed on main. Exits 1 on a failed
# subject or a regression beyond the noise.
BASE ?=
bench-compare:
	cd bench && mkdir -p out-quick && base="$(if $(BASE),$(abspath $(BASE)))"; \
	  if [ -z "$$base" ]; then base=out-quick/base.json; git show main:bench/results.json > $$base || exit 2; fi; \
	  $(GO) run . -quick -out out-quick; q=$$?; \
	  $(GO) run . -compare "$$base" out-quick/results.json && exit $$q

clean:
	$(GO) clean -testcache
