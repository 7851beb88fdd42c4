//go:build tools

// Package tools names the command build-kwok.sh builds, so that go.mod and
// go.sum hold everything it needs.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
