# Conveniences over the scripts, which are the source of truth.
.PHONY: build install uninstall test release cross-vet

# hermes version reports these; without them it falls back to the VCS
# stamp Go embeds (debug.ReadBuildInfo).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(BUILD_DATE)

# Static and without cgo, as released: hermes needs no C library, and a
# process without the dynamic loader starts about 4 ms sooner.
build:
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/hermes ./cmd/hermes-core

# PREFIX/bin/hermes: /usr/local/bin as root, else ~/.local/bin (on most
# desktops' PATH already). Override with PREFIX=...
ifeq ($(shell id -u),0)
PREFIX ?= /usr/local
else
PREFIX ?= $(HOME)/.local
endif

install: build
	install -d "$(DESTDIR)$(PREFIX)/bin"
	install -m 0755 bin/hermes bin/hermes-core "$(DESTDIR)$(PREFIX)/bin/"
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; *) echo "note: $(PREFIX)/bin is not on your PATH; add it (export PATH=\"$(PREFIX)/bin:\$$PATH\")";; esac

uninstall:
	rm -f "$(DESTDIR)$(PREFIX)/bin/hermes" "$(DESTDIR)$(PREFIX)/bin/hermes-core"

test:
	./scripts/test.sh

# The four release binaries and their SHA-256 sums in dist/.
release:
	./scripts/release.sh

# What CI checks for every platform hermes ships for.
cross-vet:
	./scripts/cross-vet.sh
