# baton — make test runs everything CI runs; make demo runs the same-host demo.

GO      ?= go
PKGS    ?= ./...
# Test timeout per package; the whole suite runs in a few minutes.
TIMEOUT ?= 15m

.PHONY: test vet deps demo bench bench-full bench-compare build clean

# WORDPKGS also run without the race detector: on the futex mutex's word
# path the race build adds synchronization of its own (race.go), so the
# shipped build is tested as well.
WORDPKGS ?= . ./local/mutex ./rwlock/shmrw ./semaphore/shmsem ./local

# bench's own tests (a smoke pass of every table on its own servers) run
# beside the plain run; each prints its failures.
test: deps vet
	$(GO) test -race -count=1 -timeout $(TIMEOUT) $(PKGS)
	@st=0; \
	  (cd bench && $(GO) vet ./... && $(GO) test -count=1 -timeout $(TIMEOUT) ./...) & bench=$$!; \
	  $(GO) test -count=1 -timeout $(TIMEOUT) $(WORDPKGS) || st=1; \
	  wait $$bench || st=1; \
	  exit $$st

vet:
	@fmt=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$fmt" ]; then echo "gofmt needed:"; echo "$$fmt"; exit 1; fi
	$(GO) vet $(PKGS)

# The tests start real servers: redis-server and redis-cli, mariadbd
# (mariadb-server), postgres (postgresql) and ZooKeeper (zookeeper, on the
# machine's Java); the live view's tests drive chromium (headless) and tmux.
# Install whichever is missing, with one apt-get.
deps:
	@missing=""; \
	  command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-server"; \
	  command -v mariadbd >/dev/null 2>&1 || test -x /usr/sbin/mariadbd || missing="$$missing mariadb-server"; \
	  ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing="$$missing postgresql"; \
	  test -f /usr/share/java/zookeeper.jar && command -v java >/dev/null 2>&1 || missing="$$missing zookeeper"; \
	  command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	  command -v tmux >/dev/null 2>&1 || missing="$$missing tmux"; \
	  if [ -n "$$missing" ]; then \
	    echo "installing$$missing"; \
	    if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	  fi
	@redis-server --version
	@PATH="$$PATH:/usr/sbin" mariadbd --version
	@ls /usr/lib/postgresql/*/bin/postgres
	@ls /usr/share/java/zookeeper.jar
	@chromium --version 2>/dev/null
	@tmux -V

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
