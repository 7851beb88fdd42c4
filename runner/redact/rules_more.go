package redact

import "strings"

// Rules for credential formats beyond the first set, after the kinds
// gitleaks' rule set covers (written here, not copied): vendor tokens with a
// fixed prefix, Slack webhook URLs, and passwords given as short
// command-line flags.

// matchVendor finds vendor tokens recognised by a fixed prefix. Each keeps
// its prefix (it names the kind) and masks the rest.
func matchVendor(s string, i int) match {
	if !wordStart(s, i) {
		return match{}
	}
	rest := s[i:]
	for _, v := range vendorsByFirst[s[i]] {
		if strings.HasPrefix(rest, v.prefix) {
			if m := prefixed(s, i, len(v.prefix), v.class, v.min); m.hit {
				return m
			}
		}
	}
	if s[i] == 'h' && strings.HasPrefix(rest, "hooks.slack.com/services/") {
		return prefixed(s, i, len("hooks.slack.com/services/"), isWebhookPath, 20)
	}
	return match{}
}

type vendorToken struct {
	prefix string
	class  *[256]bool
	min    int
}

var (
	isHexLower    = byteSet("0123456789abcdef")
	isWebhookPath = byteSet(alnum + "/_-")
	isSendGrid    = byteSet(alnum + "_-.")
)

// vendorTokens, by prefix. The minimum length keeps words that merely start
// like a token ("dapper", "gsk_test") unmasked.
var vendorTokens = []vendorToken{
	{"rk_live_", isAlnum, 20}, {"rk_test_", isAlnum, 20}, // Stripe restricted keys
	{"ya29.", isKeyChar, 20},                                                              // Google OAuth access tokens
	{"dapi", isHexLower, 32},                                                              // Databricks
	{"dop_v1_", isHexLower, 64}, {"doo_v1_", isHexLower, 64}, {"dor_v1_", isHexLower, 64}, // DigitalOcean
	{"gsk_", isAlnum, 20},    // Groq
	{"r8_", isAlnum, 20},     // Replicate
	{"pplx-", isAlnum, 20},   // Perplexity
	{"pypi-", isKeyChar, 40}, // PyPI upload tokens
	{"SG.", isSendGrid, 40},  // SendGrid
}

// vendorsByFirst holds vendorTokens by the first byte of their prefix, so a
// word that merely starts with a trigger letter ("do", "red") is compared
// with the one or two prefixes it could be, not all of them.
var vendorsByFirst = func() *[256][]vendorToken {
	var t [256][]vendorToken
	for _, v := range vendorTokens {
		t[v.prefix[0]] = append(t[v.prefix[0]], v)
	}
	return &t
}()

// matchShortFlag finds passwords given as short flags: the attached form
// (mysql -pSECRET) anywhere it looks like a password, and the separate form
// (sshpass -p pw, docker login -p pw, redis-cli -a pw, curl -u user:pw)
// after a command known to take a password there, since elsewhere the same
// letters mean a port (ssh -p 22) or "parents" (mkdir -p dir).
func matchShortFlag(s string, i int, prev behind) match {
	if i+2 >= len(s) {
		return match{}
	}
	if c, ok := prev.at(s, i-1); ok && !isFlagBefore[c] {
		return match{}
	}
	switch flag := s[i+1]; {
	case flag == 'u':
		return matchUserPassword(s, i+2)
	case strings.IndexByte("pPa", flag) < 0:
		return match{}
	case isBlank[s[i+2]]:
		return matchSeparatePassword(s, i, prev, flag)
	case flag == 'p':
		return matchAttachedPassword(s, i+2)
	}
	return match{}
}

// matchUserPassword masks the password of curl -u user:password (also
// attached, -uuser:pw), the user:password credentials starting at s[vs]
// or after the blanks there.
func matchUserPassword(s string, vs int) match {
	if isBlank[s[vs]] {
		vs = span(s, vs, isBlank)
	}
	start, end, ok := valueAt(s, vs)
	if !ok {
		return match{}
	}
	colon := strings.IndexByte(s[start:end], ':')
	if colon < 0 || start+colon+1 >= end {
		return match{}
	}
	return found(start+colon+1, end)
}

// matchSeparatePassword masks the value after the short flag at s[i] and
// the blanks that follow it, when the command in front takes a password
// there: a value starting with '-' is the next flag, not a password.
func matchSeparatePassword(s string, i int, prev behind, flag byte) match {
	vs := span(s, i+2, isBlank)
	if vs >= len(s) || s[vs] == '-' || !passwordCommandBefore(s, prev, i, flag) {
		return match{}
	}
	start, end, ok := valueAt(s, vs)
	if !ok {
		return match{}
	}
	return found(start, end)
}

// matchAttachedPassword masks the password attached to -p (-pSECRET) that
// starts at s[vs]. Short runs of lower-case letters are bundled flags
// (cp -pr, rsync -pavz), not passwords.
func matchAttachedPassword(s string, vs int) match {
	if next := s[vs]; isValueStop[next] || next == '-' || next == '=' {
		return match{}
	}
	end := span(s, vs, notValueStop)
	v := s[vs:end]
	if len(v) < 4 || len(v) < 8 && strings.Trim(v, "abcdefghijklmnopqrstuvwxyz") == "" {
		return match{}
	}
	return found(vs, end)
}

// passwordCommands take a password as the value of the short flag.
var passwordCommands = []struct {
	word string
	flag byte
}{
	{"sshpass", 'p'}, {"login", 'p'}, {"mysql", 'p'}, {"mariadb", 'p'},
	{"mysqldump", 'p'}, {"mysqladmin", 'p'}, {"redis-cli", 'a'},
	{"zip", 'P'}, {"unzip", 'P'}, {"7z", 'p'},
}

// passwordCommandBefore reports whether the line in front of s[i] runs a
// command that takes a password after -flag.
func passwordCommandBefore(s string, prev behind, i int, flag byte) bool {
	line := prev.text(s, commandStart(s, prev, i), i)
	for _, pc := range passwordCommands {
		if pc.flag == flag && hasCommandWord(line, pc.word) {
			return true
		}
	}
	return false
}

// commandStart returns where the command that s[i] is part of begins: after
// the last line break or shell separator in front of it, looking back at
// most 256 bytes so that the scan stays linear on one long line.
func commandStart(s string, prev behind, i int) int {
	from := i
	for n := 0; n < 256; n++ {
		c, ok := prev.at(s, from-1)
		if !ok || c == '\n' || c == ';' || c == '|' || c == '&' {
			break
		}
		from--
	}
	return from
}

// hasCommandWord reports whether word stands in line as a whole word: a
// letter, digit, '_' or (in front) '-' next to it makes it part of a longer
// name (mysqldump holds no mysql, --login no login).
func hasCommandWord(line, word string) bool {
	for j := strings.Index(line, word); j >= 0; {
		before := j == 0 || !isWord[line[j-1]] && line[j-1] != '-'
		after := j+len(word) == len(line) || !isWord[line[j+len(word)]]
		if before && after {
			return true
		}
		k := strings.Index(line[j+1:], word)
		if k < 0 {
			break
		}
		j += 1 + k
	}
	return false
}
