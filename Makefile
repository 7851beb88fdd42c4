# Conveniences over the scripts, which are the source of truth.
.PHONY: build test release cross-vet

build:
	go build -o bin/hermes ./cmd/hermes

test:
	./scripts/test.sh

# The four release binaries and their SHA-256 sums in dist/.
release:
	./scripts/release.sh

# What CI checks for every platform hermes ships for.
cross-vet:
	./scripts/cross-vet.sh
