package redact

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// fragments are the pieces secrets and their surroundings are made of.
// Random sequences of them reach rule interactions that byte-level fuzzing
// finds slowly.
var fragments = []string{
	"sk-", "sk_live_", "ghp_", "github_pat_", "AKIA", "AIza", "xoxb-", "glpat-", "npm_", "hf_", "eyJ", "Bearer ", "bearer\t",
	"token", "password", "Authorization", "api-key", "pwd", "old", "basic ", "Token ",
	"=", ":", ":=", "=>", "==", " ", "  ", "\t", "\n", "\r", `"`, "'", "`", `\`, `\"`, ",", ";", "&", "(", ")", "{", "}", "[", "]", "<", ">",
	"/", "?", "#", "@", "://", "x://", "https://", ".", "-", "--", "_", "*", "***",
	"-----BEGIN ", "-----END ", "PRIVATE KEY", "RSA ", "-----",
	"abcdefghij", "ABCDEFGHIJ", "0123456789", "Zq8x", "é", "\xff",
}

func randomText(r *rand.Rand) string {
	var b strings.Builder
	for n := 1 + r.IntN(24); n > 0; n-- {
		f := fragments[r.IntN(len(fragments))]
		if r.IntN(4) == 0 {
			f = strings.Repeat(f, 1+r.IntN(5))
		}
		b.WriteString(f)
	}
	return b.String()
}

func TestStringRandomFragments(t *testing.T) {
	n := 20_000
	if testing.Short() {
		n = 2_000
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range n {
		in := randomText(r)
		out := String(in)
		if again := String(out); again != out {
			t.Fatalf("not idempotent for %q:\n once  %q\n twice %q", in, out, again)
		}
		planted := in + "\n" + seedSecret + "\n" + randomText(r)
		if strings.Contains(String(planted), seedSecret[3:]) {
			t.Fatalf("seed secret survived in %q", planted)
		}
	}
}
