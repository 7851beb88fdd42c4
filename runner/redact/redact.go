// Package redact masks secrets in free text (commands, process output, error
// messages) before it is persisted.
//
// # Mask style
//
// Every secret value is replaced by [Mask], "***". What names the kind of
// secret, and is not itself secret, stays in place so a reader can still tell
// what was there:
//
//	sk-proj-Ab12…                -> sk-***        OpenAI, Anthropic (sk-ant-…)
//	sk_live_…, sk_test_…         -> sk_live_***   Stripe
//	ghp_… gho_ ghu_ ghs_ ghr_    -> ghp_***       GitHub (also github_pat_***)
//	glpat-… npm_… hf_…           -> glpat-***     GitLab, npm, Hugging Face
//	AKIA0123456789ABCDEF         -> AKIA***       AWS key id (also ASIA***)
//	AIzaSy…                      -> AIza***       Google API key
//	xoxb-…                       -> xoxb-***      Slack (xoxa, xoxp, xoxr, xoxs)
//	eyJhbGci….eyJzdWIi….sig      -> eyJ***        JSON Web Token
//	Bearer abc…                  -> Bearer ***
//	password=hunter2             -> password=***  and "api_key": "***",
//	                                              ?token=***, --token ***, …
//	postgres://user:pw@host      -> postgres://user:***@host
//	rk_live_… ya29.… dapi… dop_v1_… gsk_… r8_… pplx-… pypi-… SG.…
//	                             -> rk_live_***  Stripe, Google OAuth,
//	                                Databricks, DigitalOcean, Groq,
//	                                Replicate, Perplexity, PyPI, SendGrid
//	https://hooks.slack.com/services/…  -> …/services/***  Slack webhooks
//	sshpass -p pw, docker login -p pw, mysql -pPW, redis-cli -a pw
//	                             -> -p ***       short password flags (the
//	                                separate form only after a command that
//	                                takes a password there: ssh -p 22 stays)
//	curl -u user:pw              -> -u user:***
//	AccountKey=…                 -> AccountKey=***  (Azure connection strings)
//	-----BEGIN … PRIVATE KEY-----   armor lines kept, body replaced by
//	                                "\n***\n" (to the end of the text when
//	                                the END line is missing)
//
// A key/value pair is masked when its key ends with a word that names a
// secret (password, passwd, passphrase, secret, token, auth, authorization,
// credential(s), api_key, access_key, secret_key, private_key and a few
// more), whatever its case and punctuation: DB_PASSWORD, apiKey, X-Api-Key,
// client_secret, AWS_SECRET_ACCESS_KEY. An authorization scheme word (Bearer,
// Basic, token) in the value is kept and the credentials after it masked.
//
// No part of a secret survives, not even its tail: a match always covers the
// whole run of characters the secret is made of, terminal colour codes
// inside it included (a coloured "sk-ant-\x1b[0m…" is one key).
//
// # How it scans
//
// String makes one left-to-right pass over the bytes and looks closer only
// where the next two bytes can start a secret ("sk", "gh", "AK", "--", any
// ':' or '=', …); on amd64 with AVX2 a vector filter passes over 32 bytes at
// a time to find those places. Every rule is a bounded or consuming scan, so the cost is
// linear in the input whatever it holds; there are no regular expressions.
// Text with nothing to mask is returned as is, without allocating.
//
// Applying String to its own output changes nothing (it is idempotent), so
// text may be redacted more than once on its way to storage.
package redact

import (
	"math/bits"
	"strings"
)

// Mask replaces every secret value.
const Mask = "***"

// String returns s with every secret it recognises replaced by [Mask]. When
// nothing matches it returns s itself.
func String(s string) string {
	out, _ := redact(s)
	return out
}

// redact is String that also says whether anything was masked, so nested
// calls can skip a copy when nothing changed.
func redact(s string) (string, bool) {
	var b strings.Builder
	var prev behind // s[prev.last:] has not been copied to b yet
	starts, scan := startPairs(), vectorScan()
	// The last byte cannot start a secret: every rule needs at least two.
	for i := 0; ; i++ {
		if i = nextStart(starts, scan, s, i); i+1 >= len(s) {
			break
		}
		m := matchAt(s, i, prev)
		if m.end <= i {
			continue // no match
		}
		if !m.hit {
			i = m.end - 1 // a region checked and found clean
			continue
		}
		if b.Cap() == 0 {
			// A little headroom for masks longer than what they hide.
			b.Grow(len(s) + 16)
		}
		b.WriteString(s[prev.last:m.start])
		b.WriteString(m.repl)
		prev = behind{last: m.end, repl: m.repl}
		i = m.end - 1
	}
	if b.Cap() == 0 {
		return s, false
	}
	b.WriteString(s[prev.last:])
	return b.String(), true
}

// nextStart returns the first position at or after i where starts says a
// match can begin, or len(s) when there is none (the last byte never
// does). With scan (the filter derived from starts, see scanTables), 32
// positions at a time go through the vector filter, and only its
// candidates are looked up: a line of one byte at 15 GB/s, where eight
// lookups at a time did 2.2 (BenchmarkString/xs). The last 32 positions,
// or all without it, go eight at a time: the first candidate among them
// comes from one mask of eight lookups.
func nextStart(starts *[1 << 16]uint8, scan *scanTables, s string, i int) int {
	if scan != nil && i+33 <= len(s) {
		j, found := vectorStart(starts, scan, s, i)
		if found {
			return j
		}
		i = j // fewer than 33 bytes left
	}
	for i+9 <= len(s) {
		p := s[i : i+9]
		mask := starts[uint16(p[0])|uint16(p[1])<<8] | starts[uint16(p[1])|uint16(p[2])<<8]<<1 |
			starts[uint16(p[2])|uint16(p[3])<<8]<<2 | starts[uint16(p[3])|uint16(p[4])<<8]<<3 |
			starts[uint16(p[4])|uint16(p[5])<<8]<<4 | starts[uint16(p[5])|uint16(p[6])<<8]<<5 |
			starts[uint16(p[6])|uint16(p[7])<<8]<<6 | starts[uint16(p[7])|uint16(p[8])<<8]<<7
		if mask != 0 {
			return i + bits.TrailingZeros8(mask)
		}
		i += 8
	}
	for ; i+1 < len(s); i++ {
		if starts[uint16(s[i])|uint16(s[i+1])<<8] != 0 {
			return i
		}
	}
	return len(s)
}

// vectorStart is nextStart through the vector filter, from i while 33
// bytes are left: the position found and true, or where it stopped and
// false.
func vectorStart(starts *[1 << 16]uint8, scan *scanTables, s string, i int) (int, bool) {
	for {
		pos, mask := scanCandidates(scan, s, i)
		if mask == 0 {
			return pos, false
		}
		for ; mask != 0; mask &= mask - 1 {
			if j := pos + bits.TrailingZeros32(mask); starts[uint16(s[j])|uint16(s[j+1])<<8] != 0 {
				return j, true
			}
		}
		if i = pos + 32; i+33 > len(s) {
			return i, false
		}
	}
}

// behind is the text in front of the scan position as a second pass over
// the output would see it: s[last:] as it is, and before that the output
// that ends with repl, the last replacement. Rules that look back (for a
// key name) read it, so that masking never changes what they find and
// redacting twice gives the same result as redacting once. Every
// replacement holds a Mask, which no such rule reads across, so the output
// before repl is never needed.
type behind struct {
	last int
	repl string
}

// at returns the byte at position j of the text that ends at s[j+1:], as a
// second pass would see it, and false past the start of what is known.
func (b behind) at(s string, j int) (byte, bool) {
	if j >= b.last {
		return s[j], true
	}
	if k := len(b.repl) - (b.last - j); k >= 0 {
		return b.repl[k], true
	}
	return 0, false
}

// text returns what stands between positions from and to, from <= to.
func (b behind) text(s string, from, to int) string {
	if from >= b.last {
		return s[from:to]
	}
	head := b.repl[len(b.repl)-(b.last-from):]
	if to <= b.last {
		return head[:len(head)-(b.last-to)]
	}
	return head + s[b.last:to]
}

// match is what a rule found at trigger position i. With hit set,
// s[start:end] is replaced by repl, and end > i; start is at or after i
// except for rules that look back, which stop at what is already masked. Without it, an
// end beyond i means s[i:end] was examined as a whole and holds nothing to
// mask, so the scan resumes at end; an end <= i means no match.
type match struct {
	start, end int
	repl       string
	hit        bool
}

// found builds a hit that masks s[start:end].
func found(start, end int) match {
	return match{start: start, end: end, repl: Mask, hit: true}
}

// matchAt tries the rules that the trigger byte s[i] can start; prev is
// what stands behind s[i]. s[i+1] exists: no rule starts at the last byte.
func matchAt(s string, i int, prev behind) match {
	switch s[i] {
	case 's':
		return matchSK(s, i)
	case 'g':
		if m := matchGitHub(s, i); m.hit {
			return m
		}
		return matchVendor(s, i)
	case 'n', 'h':
		// No vendor token starts with 'n': for it, matchVendor only
		// confirms the miss.
		if m := matchShort(s, i); m.hit {
			return m
		}
		return matchVendor(s, i)
	case 'A':
		return matchUpperA(s, i)
	case 'r', 'y', 'd', 'p', 'S':
		return matchVendor(s, i)
	case 'x':
		return matchSlack(s, i)
	case 'e':
		return matchJWT(s, i)
	case 'b', 'B':
		return matchBearer(s, i)
	case '-':
		return matchDash(s, i, prev)
	case ':':
		if strings.HasPrefix(s[i+1:], "//") {
			return matchURL(s, i)
		}
		return matchKeyValue(s, i, prev)
	case '=':
		return matchKeyValue(s, i, prev)
	}
	return match{}
}

// matchDash tries the rules that a '-' at s[i] can start. A second '-'
// begins a PEM armor line or a long flag, anything else at most a short
// flag, so only the rules that can match are called: a '-' is common in
// commands.
func matchDash(s string, i int, prev behind) match {
	if s[i+1] != '-' {
		return matchShortFlag(s, i, prev)
	}
	if m := matchPEM(s, i); m.hit {
		return m
	}
	if m := matchPEMTail(s, i, prev); m.hit {
		return m
	}
	return matchFlag(s, i, prev)
}
