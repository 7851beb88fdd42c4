package job_test

import (
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/hermesrun/hermes/job"
)

// The contract's id grammar, as regular expressions: IsID and IsPrefix
// must agree with them on every input.
var (
	idGrammar     = regexp.MustCompile(`^proc_[0-9a-f]{12}$`)
	prefixGrammar = regexp.MustCompile(`^proc_[0-9a-f]{4,12}$`)
)

func TestIDGrammar(t *testing.T) {
	cases := []string{
		"", "proc_", "proc_abc", "proc_abcd", "proc_0123456789ab", "proc_0123456789abc",
		"proc_0123456789AB", "proc_0123456789ag", "Proc_0123456789ab", "proc-0123456789ab",
		"proc_0123456789ab\n", " proc_0123456789ab", "proc_0123", "proc_012g", "xproc_0123",
		"proc_０１２３", "proc_0123456789a", "proc_/../x", "proc_ffffffffffff",
	}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789abcdefgABF_p\n-"
	for range 20000 {
		b := []byte("proc_")
		for range r.IntN(15) {
			b = append(b, alphabet[r.IntN(len(alphabet))])
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := job.IsID(s), idGrammar.MatchString(s); got != want {
			t.Errorf("IsID(%q) = %v; want %v", s, got, want)
		}
		if got, want := job.IsPrefix(s), prefixGrammar.MatchString(s); got != want {
			t.Errorf("IsPrefix(%q) = %v; want %v", s, got, want)
		}
	}
}
