package redact

import (
	"strings"
	"sync"
)

const (
	upperAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	alnum      = upperAlnum + "abcdefghijklmnopqrstuvwxyz"
)

// Byte classes. They are filled once at start-up and only read afterwards.
var (
	isAlnum      = byteSet(alnum)
	isUpperAlnum = byteSet(upperAlnum)
	isWord       = byteSet(alnum + "_")
	isKeyChar    = byteSet(alnum + "_-") // sk- keys, Google keys, JWT segments
	isSlackChar  = byteSet(alnum + "-")
	isJWTChar    = byteSet(alnum + "_-.")
	isIdent      = byteSet(alnum + "_-.") // key names in key=value pairs
	isToken68    = byteSet(alnum + "-._~+/=")
	isPEMLabel   = byteSet(upperAlnum + " ")
	isPEMBody    = byteSet(alnum + "+/=\r\n")
	isNewline    = byteSet("\r\n")
	isBlank      = byteSet(" \t")
	isQuote      = byteSet("\"'`")
	isBackslash  = byteSet("\\")
	isPathSep    = byteSet("/\\")
	isFlagBefore = byteSet(" \t\n\r\"'")
	// isURLStop ends the authority part of a URL (userinfo@host:port).
	isURLStop = byteSet(" \t\n\v\f\r/?#\"'<>`\\")
	// isValueStop ends an unquoted value. Commas and semicolons do not: a
	// password may hold them, and masking a little too much is the safe side.
	isValueStop = byteSet(" \t\n\v\f\r\"'`&)]}<>")
	// isValueOpen may not start an unquoted value: it opens a structure (a
	// JSON object, a shell subexpression), not a secret.
	isValueOpen = byteSet("([{")
)

// startPairs says, for the two bytes at a position, whether a match can
// start there, so the scan passes over most bytes with one lookup; the
// rules themselves still check everything. It is indexed by the pair read
// as one little-endian uint16 (first byte low), and holds a bool per pair:
// one 16-bit load and one byte load per position, where a bit set cost a
// shift, a mask and a dependent load more (the bare loops: 2.2 against 0.7
// GB/s; BenchmarkString on a line of x: 1.8 against 1.2). Its 64 KiB are
// built on first use, not by every hermes process at start.
//
// Its entries are 0 or 1 rather than bools so that the scan can OR eight
// of them and branch once (see nextStart).
var startPairs = sync.OnceValue(func() *[1 << 16]uint8 {
	var t [1 << 16]uint8
	add := func(first byte, seconds string) {
		for i := 0; i < len(seconds); i++ {
			t[uint16(first)|uint16(seconds[i])<<8] = 1
		}
	}
	add('s', "k")
	add('g', "hils")
	add('n', "p")
	add('h', "fo")
	add('A', "KSI")
	add('r', "k8")
	add('y', "a")
	add('d', "ao")
	add('p', "py")
	add('S', "G")
	add('-', "pPau")
	add('x', "o")
	add('e', "y")
	add('b', "eE")
	add('B', "eE")
	add('-', "-")
	var every [256]byte
	for c := range every {
		every[c] = byte(c)
	}
	add(':', string(every[:])) // key/value separators: what follows is
	add('=', string(every[:])) // anything, the key is behind them
	return &t
})

func byteSet(chars string) *[256]bool {
	var t [256]bool
	for i := 0; i < len(chars); i++ {
		t[chars[i]] = true
	}
	return &t
}

// span returns the end of the run of class bytes that starts at i.
func span(s string, i int, class *[256]bool) int {
	for i < len(s) {
		if class[s[i]] {
			i++
			continue
		}
		// A terminal colour code inside a token (a tool that colours
		// part of a key) must not end it early and leave its tail: for
		// token classes, a CSI sequence followed by more of the token is
		// part of the run.
		if s[i] == 0x1b && class['a'] {
			if j := csiEnd(s, i); j > i && j < len(s) && class[s[j]] {
				i = j
				continue
			}
		}
		break
	}
	return i
}

// csiEnd returns the end of the ANSI CSI sequence (ESC [ params final)
// at s[i], or i when there is none.
func csiEnd(s string, i int) int {
	if i+1 >= len(s) || s[i+1] != '[' {
		return i
	}
	for j := i + 2; j < len(s) && j < i+32; j++ {
		if c := s[j]; c >= 0x40 && c <= 0x7e {
			return j + 1
		} else if c < 0x20 || c > 0x3f {
			return i
		}
	}
	return i
}

// wordStart reports whether a token starting at s[i] is not the tail of a
// longer word ("task-1234" holds no "sk-" key).
func wordStart(s string, i int) bool {
	if i == 0 || !isAlnum[s[i-1]] {
		return true
	}
	// Right after a terminal colour code ("\x1b[32m" ends in a letter).
	for e := i - 2; e >= 0 && e >= i-32; e-- {
		if s[e] == 0x1b {
			return csiEnd(s, e) == i
		}
	}
	return false
}

// prefixed masks the run of class bytes after a kept prefix of n bytes at
// s[i:], when that run is at least min long.
func prefixed(s string, i, n int, class *[256]bool, min int) match {
	start := i + n
	end := span(s, start, class)
	if end-start < min {
		return match{}
	}
	return found(start, end)
}

// matchSK finds OpenAI and Anthropic keys (sk-…, sk-proj-…, sk-ant-…) and
// Stripe secret keys (sk_live_…, sk_test_…).
func matchSK(s string, i int) match {
	if !wordStart(s, i) {
		return match{}
	}
	rest := s[i:]
	switch {
	case strings.HasPrefix(rest, "sk-"):
		return prefixed(s, i, 3, isKeyChar, 20)
	case strings.HasPrefix(rest, "sk_live_"), strings.HasPrefix(rest, "sk_test_"):
		return prefixed(s, i, 8, isAlnum, 20)
	}
	return match{}
}

// matchGitHub finds GitHub tokens: ghp_, gho_, ghu_, ghs_, ghr_ and
// fine-grained github_pat_ ones; and GitLab's glpat-.
func matchGitHub(s string, i int) match {
	if !wordStart(s, i) {
		return match{}
	}
	rest := s[i:]
	if len(rest) > 4 && rest[1] == 'h' && rest[3] == '_' && strings.IndexByte("pousr", rest[2]) >= 0 {
		return prefixed(s, i, 4, isAlnum, 20)
	}
	if strings.HasPrefix(rest, "github_pat_") {
		return prefixed(s, i, 11, isWord, 20)
	}
	if strings.HasPrefix(rest, "glpat-") {
		return prefixed(s, i, 6, isKeyChar, 20) // GitLab
	}
	return match{}
}

// matchShort finds tokens whose kind prefix is short and lower case: npm
// (npm_…) and Hugging Face (hf_…).
func matchShort(s string, i int) match {
	if !wordStart(s, i) {
		return match{}
	}
	switch rest := s[i:]; {
	case strings.HasPrefix(rest, "npm_"):
		return prefixed(s, i, 4, isAlnum, 20)
	case strings.HasPrefix(rest, "hf_"):
		return prefixed(s, i, 3, isAlnum, 20)
	}
	return match{}
}

// matchUpperA finds AWS access key ids (AKIA/ASIA and exactly 16 more) and
// Google API keys (AIza…).
func matchUpperA(s string, i int) match {
	if !wordStart(s, i) {
		return match{}
	}
	rest := s[i:]
	switch {
	case strings.HasPrefix(rest, "AKIA"), strings.HasPrefix(rest, "ASIA"):
		start := i + 4
		end := start
		for end < len(s) && end < start+16 && isUpperAlnum[s[end]] {
			end++
		}
		if end-start == 16 && (end == len(s) || !isAlnum[s[end]]) {
			return found(start, end)
		}
	case strings.HasPrefix(rest, "AIza"):
		return prefixed(s, i, 4, isKeyChar, 30)
	}
	return match{}
}

// matchSlack finds Slack tokens: xoxa-, xoxb-, xoxp-, xoxr-, xoxs-.
func matchSlack(s string, i int) match {
	rest := s[i:]
	if !wordStart(s, i) || len(rest) < 5 || !strings.HasPrefix(rest, "xox") || rest[4] != '-' ||
		strings.IndexByte("abprs", rest[3]) < 0 {
		return match{}
	}
	return prefixed(s, i, 5, isSlackChar, 10)
}

// matchJWT finds JSON Web Tokens: three base64url segments joined by dots,
// the first one an encoded JSON object ("eyJ"). The token must start its run
// of token bytes, so a long run is examined once, not at every "eyJ" in it.
func matchJWT(s string, i int) match {
	if i > 0 && isJWTChar[s[i-1]] || !strings.HasPrefix(s[i:], "eyJ") {
		return match{}
	}
	header := span(s, i, isKeyChar)
	if header-i < 10 || header >= len(s) || s[header] != '.' {
		return match{}
	}
	payload := span(s, header+1, isKeyChar)
	if payload-header-1 < 10 || payload >= len(s) || s[payload] != '.' {
		return match{}
	}
	return found(i+3, span(s, payload+1, isKeyChar))
}

// matchBearer finds "Bearer <token>" outside any header. Unlike a header
// value it sits in prose, so the token has to look like one: 8 or more
// bytes with a digit, or 20 or more ("the bearer of bad news" stays).
func matchBearer(s string, i int) match {
	if !wordStart(s, i) || !hasPrefixFold(s[i:], "bearer") {
		return match{}
	}
	j := i + len("bearer")
	start := span(s, j, isBlank)
	if start == j {
		return match{}
	}
	end := span(s, start, isToken68)
	n := end - start
	if n >= 20 || n >= 8 && strings.ContainsAny(s[start:end], "0123456789") {
		return found(start, end)
	}
	return match{}
}

// hasPrefixFold is strings.HasPrefix ignoring ASCII case; prefix is lower case.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// matchPEM masks the body of a PEM private key block, keeping its armor
// lines. A block whose END line never comes (cut-off output) is masked to
// the end of the text.
func matchPEM(s string, i int) match {
	const begin, end, dashes = "-----BEGIN ", "-----END ", "-----"
	if !strings.HasPrefix(s[i:], begin) {
		return match{}
	}
	labelEnd := span(s, i+len(begin), isPEMLabel)
	if !strings.HasPrefix(s[labelEnd:], dashes) || !strings.Contains(s[i+len(begin):labelEnd], "PRIVATE KEY") {
		return match{}
	}
	body := labelEnd + len(dashes)
	for from := body; ; {
		k := strings.Index(s[from:], end)
		if k < 0 {
			return match{start: body, end: len(s), repl: "\n" + Mask, hit: true}
		}
		k += from
		labelEnd := span(s, k+len(end), isPEMLabel)
		if strings.HasPrefix(s[labelEnd:], dashes) && strings.Contains(s[k+len(end):labelEnd], "PRIVATE KEY") {
			return match{start: body, end: k, repl: "\n" + Mask + "\n", hit: true}
		}
		from = k + len(end)
	}
}

// matchPEMTail masks the body of a private key block whose BEGIN line is
// missing, as happens when only the tail of an output is kept: the whole
// lines of base64 that run up to the END line. It looks back no further
// than what has not been masked yet, so a second pass finds nothing new.
func matchPEMTail(s string, i int, prev behind) match {
	const end, dashes = "-----END ", "-----"
	if !strings.HasPrefix(s[i:], end) {
		return match{}
	}
	labelEnd := span(s, i+len(end), isPEMLabel)
	if !strings.HasPrefix(s[labelEnd:], dashes) || !strings.Contains(s[i+len(end):labelEnd], "PRIVATE KEY") {
		return match{}
	}
	armorEnd := labelEnd + len(dashes)
	bodyEnd := i
	for bodyEnd > prev.last && isNewline[s[bodyEnd-1]] {
		bodyEnd--
	}
	start := bodyEnd
	for start > prev.last && isPEMBody[s[start-1]] {
		start--
	}
	if start > 0 {
		// Stopped on something else: keep the partial line, it is not
		// base64 from start to end.
		nl := strings.IndexByte(s[start:bodyEnd], '\n')
		if nl < 0 {
			return match{}
		}
		start += nl + 1
	}
	start = span(s[:bodyEnd], start, isNewline)
	if start >= bodyEnd {
		return match{}
	}
	return match{start: start, end: armorEnd, repl: Mask + s[bodyEnd:armorEnd], hit: true}
}

// matchFlag finds command-line flags that take a secret as the next
// argument: --password hunter2, --api-key 'x'. The --flag=value form is a
// key/value pair and left to matchKeyValue.
func matchFlag(s string, i int, prev behind) match {
	if !strings.HasPrefix(s[i:], "--") {
		return match{}
	}
	if c, ok := prev.at(s, i-1); ok && !isFlagBefore[c] {
		return match{}
	}
	keyEnd := span(s, i+2, isIdent)
	if !sensitiveKey(s[i+2 : keyEnd]) {
		return match{}
	}
	vs := span(s, keyEnd, isBlank)
	if vs == keyEnd || vs == len(s) || s[vs] == '-' {
		return match{}
	}
	start, end, ok := valueAt(s, vs)
	if !ok {
		return match{}
	}
	// The flag name is replaced too, so that a token hiding in it is not
	// copied out unexamined.
	key, _ := redact(s[i+2 : keyEnd])
	return match{start: i, end: end, repl: "--" + key + s[keyEnd:start] + Mask, hit: true}
}

// matchKeyValue finds key=value and key: value pairs whose key names a
// secret (see sensitiveKey), in env lines, YAML, JSON, HTTP headers and
// URL queries, and masks the value. s[i] is the '=' or ':'; the key is
// looked for in what stands behind it, prev.
func matchKeyValue(s string, i int, prev behind) match {
	keyEnd, from, quotedOnly := i, i+1, false
	before, _ := prev.at(s, i-1)
	if s[i] == '=' {
		if strings.IndexByte("=!<>", before) >= 0 || from < len(s) && s[from] == '=' {
			return match{} // a comparison, not an assignment
		}
		if before == ':' {
			// Go's :=. Code assigns secrets as literals; anything else
			// (auth := r.Header.Get(…)) is an expression, not a secret.
			keyEnd--
			quotedOnly = true
		}
		if from < len(s) && s[from] == '>' {
			from++ // =>
		}
	} else if from < len(s) && (s[from] == '=' || s[from] == ':') || before == ':' {
		return match{} // := is handled at its '='; :: is not a separator
	}
	if !sensitiveKey(keyBefore(s, prev, keyEnd)) {
		return match{}
	}
	return matchValue(s, from, quotedOnly)
}

// matchValue masks the value of a pair whose key names a secret, after
// the blanks at s[from]. With quotedOnly, only a quoted literal counts.
func matchValue(s string, from int, quotedOnly bool) match {
	vs := span(s, from, isBlank)
	if vs == len(s) || quotedOnly && !isQuote[s[vs]] {
		return match{}
	}
	if strings.HasPrefix(s[vs:], "-----BEGIN ") {
		return match{} // a PEM block: matchPEM masks its body, not its armor
	}
	start, end, ok := valueAt(s, vs)
	if !ok {
		return match{}
	}
	return found(start, end)
}

// keyBefore returns the key name that ends at s[end], looking back past
// blanks and a closing quote (JSON, or JSON escaped inside a string). A name
// that ends a file path (cat: /etc/passwd: …) is no key: it comes back empty.
func keyBefore(s string, prev behind, end int) string {
	is := func(j int, class *[256]bool) bool {
		c, ok := prev.at(s, j)
		return ok && class[c]
	}
	for is(end-1, isBlank) {
		end--
	}
	if is(end-1, isQuote) {
		end--
		if is(end-1, isBackslash) {
			end--
		}
	}
	start := end
	for is(start-1, isIdent) {
		start--
	}
	if is(start-1, isPathSep) {
		return ""
	}
	return prev.text(s, start, end)
}

// valueAt finds the value that starts at s[i]: quoted (up to the closing
// quote or the end of the line), or a run of bytes up to a blank, quote or
// closing bracket. An authorization scheme word (see authScheme) is kept and
// the credentials after it masked.
func valueAt(s string, i int) (start, end int, ok bool) {
	if i >= len(s) {
		return 0, 0, false
	}
	switch c := s[i]; {
	case isQuote[c]:
		start = i + 1
		end = quotedEnd(s, start, c, false)
	case c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\''):
		start = i + 2
		end = quotedEnd(s, start, s[i+1], true)
	case isValueStop[c] || isValueOpen[c]:
		return 0, 0, false
	default:
		start = i
		end = span(s, i, notValueStop)
		if authScheme(s[start:end]) {
			if cs := span(s, end, isBlank); cs > end {
				if ce := span(s, cs, notValueStop); ce > cs {
					start, end = cs, ce
				}
			}
		}
	}
	return start, end, end > start
}

// authScheme reports whether word is an HTTP authorization scheme that is
// followed by the credentials (Authorization: Bearer x, token x, Basic x).
func authScheme(word string) bool {
	switch len(word) {
	case 3:
		return hasPrefixFold(word, "bot")
	case 5:
		return hasPrefixFold(word, "basic") || hasPrefixFold(word, "token")
	case 6:
		return hasPrefixFold(word, "bearer")
	}
	return false
}

// notValueStop is the complement of isValueStop.
var notValueStop = func() *[256]bool {
	var t [256]bool
	for i := range t {
		t[i] = !isValueStop[i]
	}
	return &t
}()

// quotedEnd returns where the quoted text starting at s[i] ends: at the
// closing quote q (written \q when escaped is set), or at the end of the
// line or text when it never closes. A backslash escapes the next byte.
func quotedEnd(s string, i int, q byte, escaped bool) int {
	for i < len(s) {
		switch c := s[i]; {
		case c == '\n' || c == '\r':
			return i
		case c == '\\':
			if i+1 < len(s) && s[i+1] == q && escaped {
				return i
			}
			if i+1 < len(s) && (s[i+1] == '\n' || s[i+1] == '\r') {
				return i + 1
			}
			i += 2
		case c == q && !escaped:
			return i
		default:
			i++
		}
	}
	return len(s)
}

// matchURL handles the authority part of a URL, scheme://user:password@host,
// as one unit: it masks the password and redacts user and host on their own,
// so that no other rule reads across the URL's own delimiters. s[i:] starts
// with "://".
func matchURL(s string, i int) match {
	start := i + 3
	end := span(s, start, notURLStop)
	zone := s[start:end]
	if zone == "hooks.slack.com" && strings.HasPrefix(s[end:], "/services/") {
		// A Slack webhook's path is its credential.
		if m := matchVendor(s, start); m.hit {
			return m
		}
	}
	if at := strings.LastIndexByte(zone, '@'); at >= 0 {
		if colon := strings.IndexByte(zone[:at], ':'); colon >= 0 && colon+1 < at {
			user, _ := redact(zone[:colon])
			host, _ := redact(zone[at+1:])
			return match{start: start, end: end, repl: user + ":" + Mask + "@" + host, hit: true}
		}
	}
	if out, changed := redact(zone); changed {
		return match{start: start, end: end, repl: out, hit: true}
	}
	return match{end: end} // clean: resume after it
}

// notURLStop is the complement of isURLStop.
var notURLStop = func() *[256]bool {
	var t [256]bool
	for i := range t {
		t[i] = !isURLStop[i]
	}
	return &t
}()

// sensitiveWords are the key-name endings that mark a secret value, in the
// lower-case, letters-and-digits-only form sensitiveKey compares, filed by
// their last letter so most keys are turned down after one lookup.
var sensitiveWords = func() *[256][]string {
	var t [256][]string
	for _, w := range []string{
		"password", "passwd", "passphrase", "pwd",
		"secret", "token", "auth", "authorization", "credential", "credentials",
		"apikey", "accesskey", "secretkey", "privatekey", "secretkeybase",
		"encryptionkey", "signingkey", "masterkey", "dsn",
		"accountkey", "sharedaccesskey", "clientsecret",
	} {
		t[w[len(w)-1]] = append(t[w[len(w)-1]], w)
	}
	return &t
}()

// sensitiveKey reports whether a key name announces a secret. Case and
// punctuation do not count (API_KEY, api-key, apiKey are alike) and the
// word may end a longer name (GITHUB_TOKEN, client_secret, PGPASSWORD).
// PWD and OLDPWD are the working directory, not a password.
func sensitiveKey(key string) bool {
	var buf [16]byte
	n := 0
	for i := len(key) - 1; i >= 0 && n < len(buf); i-- {
		c := keyFold[key[i]]
		if c == 0 {
			continue
		}
		if n == 0 && sensitiveWords[c] == nil {
			return false
		}
		n++
		buf[len(buf)-n] = c
	}
	if n == 0 {
		return false
	}
	norm := buf[len(buf)-n:]
	if string(norm) == "pwd" || string(norm) == "oldpwd" {
		return false
	}
	for _, w := range sensitiveWords[norm[n-1]] {
		if n >= len(w) && string(norm[n-len(w):]) == w {
			return true
		}
	}
	return false
}

// keyFold maps a byte of a key name to the form sensitiveKey compares: a
// letter to its lower case, a digit to itself, and anything else to 0,
// since punctuation does not count. One lookup costs less than the range
// tests it stands for, on a path taken at every ':' and '='.
var keyFold = func() *[256]byte {
	var t [256]byte
	for c := range t {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			t[c] = byte(c)
		case 'A' <= c && c <= 'Z':
			t[c] = byte(c) + 'a' - 'A'
		}
	}
	return &t
}()
