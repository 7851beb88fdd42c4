package redact

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// seedSecret is the key the reference test plants in a receipt.
const seedSecret = "sk-" + "aB2cD3eF4gH5iJ6kL7mN8pQ9rS0tU1vW2xY3zA4bC5dE6fG7"

const (
	ghToken    = "ghp_" + "R4nd0mT0kenV4lue00000000000000000000"
	ghPAT      = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
	awsKeyID   = "AKIA" + "Z3Q7X2M4P6R8T0V1"
	awsSecret  = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
	slackToken = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
	googleKey  = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"
	jwt        = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	pemBody    = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZH\n"
)

func TestString(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		// Prose and near misses stay as they are.
		{"empty", "", ""},
		{"prose", "The build finished in 3.2s; 14 tests passed.", "The build finished in 3.2s; 14 tests passed."},
		{"skeleton key", "skeleton-key and task-1234", "skeleton-key and task-1234"},
		{"sk too short", "sk-1234567890", "sk-1234567890"},
		{"sk inside a word", "risk-aB2cD3eF4gH5iJ6kL7mN8pQ9rS0tU1vW2", "risk-aB2cD3eF4gH5iJ6kL7mN8pQ9rS0tU1vW2"},
		{"ghp too short", "ghp_abc and gho_", "ghp_abc and gho_"},
		{"aws id too short", "AKIA1234567890", "AKIA1234567890"},
		{"aws id too long", "AKIA" + "Z3Q7X2M4P6R8T0V1X", "AKIA" + "Z3Q7X2M4P6R8T0V1X"},
		{"bearer in prose", "the bearer of bad news", "the bearer of bad news"},
		{"bearer word", "Bearer tokens are described in RFC 6750", "Bearer tokens are described in RFC 6750"},
		{"xox without dash", "xoxo hugs", "xoxo hugs"},
		{"jwt-like", "eyJhbGciOiJIUzI1NiJ9 alone", "eyJhbGciOiJIUzI1NiJ9 alone"},
		{"pem public key", "-----BEGIN PUBLIC KEY-----\nMIIBIjAN\n-----END PUBLIC KEY-----", "-----BEGIN PUBLIC KEY-----\nMIIBIjAN\n-----END PUBLIC KEY-----"},
		{"pem certificate", "-----BEGIN CERTIFICATE-----\nMIIBIjAN\n-----END CERTIFICATE-----", "-----BEGIN CERTIFICATE-----\nMIIBIjAN\n-----END CERTIFICATE-----"},
		{"harmless keys", "user=bob host=db port=5432 tokens=40", "user=bob host=db port=5432 tokens=40"},
		{"password hash key", "password_hash=abc123", "password_hash=abc123"},
		{"pwd is a directory", "PWD=/home/bob OLDPWD=/tmp", "PWD=/home/bob OLDPWD=/tmp"},
		{"comparison", "if token == nil {", "if token == nil {"},
		{"empty value", "password=\nnext line", "password=\nnext line"},
		{"prompt", "Enter password: ", "Enter password: "},
		{"url without password", "https://bob@example.com:8443/path?q=1", "https://bob@example.com:8443/path?q=1"},
		{"url host port", "listening on http://127.0.0.1:8080/", "listening on http://127.0.0.1:8080/"},
		{"timestamps", "12:34:56 a=b c:d", "12:34:56 a=b c:d"},
		{"flag without value", "--token --verbose", "--token --verbose"},
		{"file path", "cat: /etc/passwd: Permission denied", "cat: /etc/passwd: Permission denied"},
		{"go expression", `auth := r.Header.Get("Authorization")`, `auth := r.Header.Get("Authorization")`},
		{"unicode prose", "naïve café — ünïcödé ✓", "naïve café — ünïcödé ✓"},

		// API keys keep their kind prefix.
		{"seed secret", seedSecret, "sk-***"},
		{"seed secret in command", "echo " + seedSecret, "echo sk-***"},
		{"sk-proj", "key sk-proj-" + "Ab12Cd34Ef56Gh78Ij90_Kl-Mn end", "key sk-*** end"},
		{"sk-ant", "sk-ant-api03-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0", "sk-***"},
		{"sk quoted", `"sk-` + `abcdefghijklmnopqrstuvwx"`, `"sk-***"`},
		{"stripe", "sk_live_" + "51HqLyjWDarjtT1zdp7dcXYZ", "sk_live_***"},
		{"github classic", "token " + ghToken + ".", "token ghp_***."},
		{"github kinds", "gho_" + "abcdefghijklmnopqrstuvwxyz0123456789 ghs_" + "abcdefghijklmnopqrstuvwxyz0123456789", "gho_*** ghs_***"},
		{"github fine grained", ghPAT, "github_pat_***"},
		{"gitlab npm huggingface", "glpat-" + "xY9zA8bC7dE6fG5hI4jK npm_" + "aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2 hf_" + "aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV",
			"glpat-*** npm_*** hf_***"},
		{"short prefixes in words", "the npm_config_cache and hf_home and glpat-x", "the npm_config_cache and hf_home and glpat-x"},
		{"aws key id", "id " + awsKeyID + " ok", "id AKIA*** ok"},
		{"aws session id", "ASIA" + "Z3Q7X2M4P6R8T0V1", "ASIA***"},
		{"slack", "SLACK " + slackToken, "SLACK xoxb-***"},
		{"google", "key=" + googleKey, "key=AIza***"},
		{"jwt", "got " + jwt + " back", "got eyJ*** back"},

		// Bearer tokens keep the word Bearer.
		{"authorization header", "Authorization: Bearer abc.def-ghi", "Authorization: Bearer ***"},
		{"authorization short token", "authorization: bearer x", "authorization: bearer ***"},
		{"authorization basic", "Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic ***"},
		{"authorization other scheme", "Authorization: abc123", "Authorization: ***"},
		{"authorization token scheme", "Authorization: token abc123", "Authorization: token ***"},
		{"curl header", `curl -H "Authorization: Bearer ` + jwt + `" https://x`, `curl -H "Authorization: Bearer ***" https://x`},
		{"bare bearer", "using bearer 9f8e7d6c5b4a3 now", "using bearer *** now"},
		{"bare bearer long", "BEARER abcdefghijklmnopqrstuvwxyz", "BEARER ***"},

		// AWS secrets are key/value pairs.
		{"aws ini", "aws_secret_access_key = " + awsSecret + "\nregion = x", "aws_secret_access_key = ***\nregion = x"},
		{"aws env", "AWS_SECRET_ACCESS_KEY=" + awsSecret, "AWS_SECRET_ACCESS_KEY=***"},
		{"aws session token", "AWS_SESSION_TOKEN=FwoGZXIvYXdzE", "AWS_SESSION_TOKEN=***"},

		// Key/value pairs in their many spellings.
		{"env password", "DB_PASSWORD=hunter2", "DB_PASSWORD=***"},
		{"export", "export GITHUB_TOKEN=" + ghToken + "; echo ok", "export GITHUB_TOKEN=*** echo ok"},
		{"yaml", "  passwd: hunter2\n  user: bob", "  passwd: ***\n  user: bob"},
		{"yaml quoted", "secret: 'a b c'", "secret: '***'"},
		{"json", `{"password": "x", "user": "bob"}`, `{"password": "***", "user": "bob"}`},
		{"json compact", `{"client_secret":"s3cr3t","n":1}`, `{"client_secret":"***","n":1}`},
		{"json escaped quote", `{"password": "a\"b", "x": 1}`, `{"password": "***", "x": 1}`},
		{"json in json", `"{\"api_key\":\"abc123\"}"`, `"{\"api_key\":\"***\"}"`},
		{"json number", `{"token": 12345}`, `{"token": ***}`},
		{"apikey camel", "apiKey: abc123", "apiKey: ***"},
		{"api-key header", "X-Api-Key: abc123", "X-Api-Key: ***"},
		{"access token query", "GET /cb?code=1&access_token=abc123&state=2", "GET /cb?code=1&access_token=***&state=2"},
		{"token query", "https://example.com/x?token=abc", "https://example.com/x?token=***"},
		{"passphrase", "passphrase=correct horse", "passphrase=*** horse"},
		{"other key names", "SECRET_KEY_BASE=a ENCRYPTION_KEY=b SENTRY_DSN=c basic_auth=d:e",
			"SECRET_KEY_BASE=*** ENCRYPTION_KEY=*** SENTRY_DSN=*** basic_auth=***"},
		{"go assign", `password := "hunter2"`, `password := "***"`},
		{"ruby hash", `:password => "hunter2"`, `:password => "***"`},
		{"unclosed quote", `password="abc`, `password="***`},
		{"quoted until line end", "password=\"abc\ndef\"", "password=\"***\ndef\""},
		{"flag", "mysql --password hunter2 -u root", "mysql --password *** -u root"},
		{"flag quoted", "tool --api-key 'a b' x", "tool --api-key '***' x"},
		{"flag equals", "tool --token=abc", "tool --token=***"},
		{"value with comma", "password=a,b;c", "password=***"},
		{"value in parens", "(password=abc)", "(password=***)"},

		// Credentials in URLs.
		{"url password", "https://u:p4ss@example.com/x", "https://u:***@example.com/x"},
		{"url empty user", "redis://:s3cret@localhost:6379/0", "redis://:***@localhost:6379/0"},
		{"url at in password", "postgres://app:p@ss@db:5432/app", "postgres://app:***@db:5432/app"},
		{"url token user", "https://" + ghToken + "@github.com/o/r.git", "https://ghp_***@github.com/o/r.git"},
		{"url token user and password", "https://x-access-token:" + ghToken + "@github.com", "https://x-access-token:***@github.com"},
		{"url in quotes", `"amqp://guest:guest@rabbit/"`, `"amqp://guest:***@rabbit/"`},

		// PEM private keys: armor kept, body gone.
		{"pem rsa", "-----BEGIN RSA PRIVATE KEY-----\n" + pemBody + "-----END RSA PRIVATE KEY-----\nafter",
			"-----BEGIN RSA PRIVATE KEY-----\n***\n-----END RSA PRIVATE KEY-----\nafter"},
		{"pem openssh", "x\n-----BEGIN OPENSSH PRIVATE KEY-----\n" + pemBody + "-----END OPENSSH PRIVATE KEY-----",
			"x\n-----BEGIN OPENSSH PRIVATE KEY-----\n***\n-----END OPENSSH PRIVATE KEY-----"},
		{"pem escaped in json", `{"private_key": "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"}`,
			`{"private_key": "***"}`},
		{"pem yaml", "private_key: -----BEGIN EC PRIVATE KEY-----\nMHcC\n-----END EC PRIVATE KEY-----",
			"private_key: -----BEGIN EC PRIVATE KEY-----\n***\n-----END EC PRIVATE KEY-----"},
		{"pem cut off", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq", "-----BEGIN PRIVATE KEY-----\n***"},
		{"pem begin cut off", "XsGB4t7NXp98C3SC6dVMvDuictGe\nurT8jNbvJZH\n-----END RSA PRIVATE KEY-----\nafter",
			"***\n-----END RSA PRIVATE KEY-----\nafter"},
		{"pem begin cut off after log", "build ok\nstep: done\r\nAAAA\nBBBB\r\n-----END PRIVATE KEY-----",
			"build ok\nstep: done\r\n***\r\n-----END PRIVATE KEY-----"},
		{"pem end alone", "some text\n-----END PRIVATE KEY-----", "some text\n-----END PRIVATE KEY-----"},
		{"pem with public block inside", "-----BEGIN PRIVATE KEY-----\nAAA\n-----END PUBLIC KEY-----\nBBB\n-----END PRIVATE KEY-----",
			"-----BEGIN PRIVATE KEY-----\n***\n-----END PRIVATE KEY-----"},

		// Several at once.
		{"mixed", "OPENAI_API_KEY=" + seedSecret + " curl -H 'Authorization: Bearer " + seedSecret + "' https://u:pw@h/?api_key=" + googleKey,
			"OPENAI_API_KEY=*** curl -H 'Authorization: Bearer ***' https://u:***@h/?api_key=***"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := String(tt.in)
			if got != tt.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if again := String(got); again != got {
				t.Errorf("not idempotent:\n once  %q\n twice %q", got, again)
			}
		})
	}
}

// TestStringHidesSecrets checks that no part of a secret survives, wherever
// it sits in a line.
func TestStringHidesSecrets(t *testing.T) {
	secrets := []struct{ name, text, secret string }{
		{"seed", seedSecret, seedSecret[3:]},
		{"github", ghToken, ghToken[4:]},
		{"github pat", ghPAT, ghPAT[11:]},
		{"aws id", awsKeyID, awsKeyID[4:]},
		{"aws secret", "aws_secret_access_key=" + awsSecret, awsSecret},
		{"slack", slackToken, slackToken[5:]},
		{"google", googleKey, googleKey[4:]},
		{"jwt", jwt, jwt[3:]},
		{"bearer", "Authorization: Bearer Zk9f8e7d6c5b4a3", "Zk9f8e7d6c5b4a3"},
		{"password", "password=Zq8hunter2x", "Zq8hunter2x"},
		{"url", "postgres://app:Pz7quux9@db:5432/app", "Pz7quux9"},
		{"pem", "-----BEGIN PRIVATE KEY-----\n" + pemBody + "-----END PRIVATE KEY-----", "VJTUt9Us8cKjMzEfYyjiWA4R4"},
		{"pem without begin", pemBody + "-----END PRIVATE KEY-----", "VJTUt9Us8cKjMzEfYyjiWA4R4"},
	}
	contexts := []struct{ name, before, after string }{
		{"alone", "", ""},
		{"spaces", "  ", "  "},
		{"quoted", `"`, `"`},
		{"single quoted", "'", "'"},
		{"parens", "(", ")"},
		{"line", "INFO got ", " from server\n"},
		{"json", `{"value": "`, `"}`},
		{"after 200k", strings.Repeat("x", 200_000) + "\n", ""},
		{"before 200k", "", "\n" + strings.Repeat("x", 200_000)},
	}
	for _, sec := range secrets {
		for _, c := range contexts {
			t.Run(sec.name+"/"+c.name, func(t *testing.T) {
				out := String(c.before + sec.text + c.after)
				if strings.Contains(out, sec.secret) {
					t.Fatalf("secret survived: %q", trim(out))
				}
				if strings.Contains(out, sec.secret[len(sec.secret)-6:]) {
					t.Fatalf("tail of the secret survived: %q", trim(out))
				}
			})
		}
	}
}

// TestStringIdempotentEdges holds inputs where one rule's mask could change
// what another rule sees on a second pass.
func TestStringIdempotentEdges(t *testing.T) {
	for _, in := range []string{
		"AKIA0123456789ABCDEF--token x",
		"/AKIA0123456789ABCDEF_password: x",
		"x://token=a/b&u:pw@h",
		"https://*sk_live_01234567890123456789012345678901234567890123456789(@sk-Token =>------END ",
		"-----BEGIN sk-AAAAAAAAAAAAAAAAAAAAAAAA----- PRIVATE KEY-----\nbody",
		"ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789.token:pw@h",
		"https://ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789.token:pw@h",
		`password="abc"sk-` + "AAAAAAAAAAAAAAAAAAAAAAAA",
		"token: bearer \"x\"",
	} {
		out := String(in)
		if again := String(out); again != out {
			t.Errorf("not idempotent for %q:\n once  %q\n twice %q", in, out, again)
		}
	}
}

// TestStringSeedReceipt mirrors the reference test: the seed key at the end
// of a maximal output.
func TestStringSeedReceipt(t *testing.T) {
	in := strings.Repeat("x", 200_000) + "\n" + seedSecret
	want := strings.Repeat("x", 200_000) + "\nsk-***"
	if got := String(in); got != want {
		t.Fatalf("got ...%q, want ...%q", trim(got), trim(want))
	}
}

// TestStringCleanDoesNotAllocate checks the hot path: text with nothing to
// mask comes back as it went in, without a copy.
func TestStringCleanDoesNotAllocate(t *testing.T) {
	clean := cleanText(200_000)
	if got := String(clean); got != clean {
		t.Fatalf("clean text changed")
	}
	if n := testing.AllocsPerRun(20, func() { _ = String(clean) }); n != 0 {
		t.Fatalf("String allocated %v times on clean text", n)
	}
}

// TestStringLinear feeds inputs built to make a naive scanner go quadratic.
// Each is 200,000 bytes; a linear scan takes milliseconds, a quadratic one
// would take many seconds.
func TestStringLinear(t *testing.T) {
	const size = 200_000
	units := []string{
		"eyJ-", "eyJa.", "sk-", "sk-a", "ghp_", "AKIA", "AIza-", "xoxb-", "bearer ", "Bearer a",
		":", "=", "a:", "a=", "token=", "token:", "password", `"token":"`, "--token ", "--", "-",
		"://", "x://a", "://a:b", "@", "-----BEGIN PRIVATE KEY-----", "-----BEGIN RSA PRIVATE KEY-----\n-----END X-----",
		"-----END PRIVATE KEY-----", "A\n-----END PRIVATE KEY-----", "A-----END PRIVATE KEY-----",
		"\\", `password="\`, "a",
	}
	for _, u := range units {
		in := strings.Repeat(u, size/len(u)+1)[:size]
		start := time.Now()
		out := String(in)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%q repeated: %v", u, d)
		}
		if again := String(out); again != out {
			t.Errorf("%q repeated: not idempotent", u)
		}
	}
}

func FuzzString(f *testing.F) {
	plants := []struct{ text, secret string }{
		{seedSecret, seedSecret[3:]},
		{ghToken, ghToken[4:]},
		{awsKeyID, awsKeyID[4:]},
		{"Authorization: Bearer Zk9f8e7d6c5b4a3", "Zk9f8e7d6c5b4a3"},
		{"password=Zq8hunter2x", "Zq8hunter2x"},
		{`"api_key": "Zq8hunter2x"`, "Zq8hunter2x"},
		{"postgres://app:Pz7quux9@db:5432/app", "Pz7quux9"},
		{"-----BEGIN PRIVATE KEY-----\n" + pemBody + "-----END PRIVATE KEY-----", "VJTUt9Us8cKjMzEfYyjiWA4R4"},
		{slackToken, slackToken[5:]},
		{googleKey, googleKey[4:]},
		{jwt, jwt[3:]},
	}
	f.Add("", "", uint8(0))
	f.Add("echo", "done", uint8(3))
	f.Add("https://u:", "@host/?token=x", uint8(1))
	f.Add("-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", uint8(7))
	f.Add(`{"password": "a\"`, `", "x": 1}`, uint8(5))
	f.Add("--token sk-", "Bearer eyJ", uint8(10))
	f.Add("AKIA0123456789ABCDEF--token x", "x://token=a/b&u:pw@h", uint8(2))
	f.Add("https://*sk_live_01234567890123456789012345(@sk-Token", " =>------END ", uint8(4))
	f.Fuzz(func(t *testing.T, before, after string, kind uint8) {
		for _, in := range []string{before, after, before + after} {
			out := String(in)
			if again := String(out); again != out {
				t.Fatalf("not idempotent for %q:\n once  %q\n twice %q", in, out, again)
			}
			if utf8.ValidString(in) && !utf8.ValidString(out) {
				t.Fatalf("valid UTF-8 %q came out invalid: %q", in, out)
			}
		}
		p := plants[int(kind)%len(plants)]
		if strings.Contains(before, p.secret) || strings.Contains(after, p.secret) {
			return
		}
		in := before + "\n" + p.text + "\n" + after
		out := String(in)
		if strings.Contains(out, p.secret) {
			t.Fatalf("planted secret survived in %q", out)
		}
		if again := String(out); again != out {
			t.Fatalf("not idempotent for %q:\n once  %q\n twice %q", in, out, again)
		}
	})
}

func BenchmarkString(b *testing.B) {
	clean := cleanText(200_000)
	lines := strings.SplitAfter(clean, "\n")
	for i, s := range []string{seedSecret, "Authorization: Bearer " + jwt, "password=hunter2", ghToken} {
		lines[(i+1)*len(lines)/5] = "leaked " + s + "\n"
	}
	withSecrets := strings.Join(lines, "")
	inputs := []struct{ name, in string }{
		{"clean-200k", clean},
		{"xs-200k", strings.Repeat("x", 200_000)},
		{"secrets-200k", withSecrets},
		{"seed-after-200k", strings.Repeat("x", 200_000) + "\n" + seedSecret},
	}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in.in)))
			for b.Loop() {
				_ = String(in.in)
			}
		})
	}
}

// cleanText returns n bytes of log-like output with no secret in it, but
// plenty of the bytes that make the scanner look closer (':', '=', '-',
// 's', 'e', 'b', 'x', "://").
func cleanText(n int) string {
	const line = "2026-01-02T15:04:05Z INFO step=12 status: compiling package server/sessions " +
		"(cache miss) - see https://example.com/build?id=42 for details; best effort retry bytes=1024\n"
	return strings.Repeat(line, n/len(line)+1)[:n]
}

func trim(s string) string {
	if len(s) > 120 {
		return "…" + s[len(s)-120:]
	}
	return s
}

// FuzzNextStart: the scans that skip (the vector filter where there is
// one, eight positions at a time) find the same next candidate position as
// a scan of one position at a time, from every start.
func FuzzNextStart(f *testing.F) {
	f.Add("")
	f.Add("xxxxxxxxxxxxxxxxxxxxxxxxsk-")
	f.Add("key=value -- ghp_ AKIA xoxb eyJ")
	f.Add(strings.Repeat("x", 17) + "=")
	f.Add(strings.Repeat("x", 31) + "sk" + strings.Repeat("x", 40) + "\xe9=")
	f.Add(strings.Repeat("gx", 40) + "gh")
	starts := startPairs()
	scans := map[string]*scanTables{"eight at a time": nil}
	if v := vectorScan(); v != nil {
		scans["vector"] = v
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i := 0; i <= len(s); i++ {
			want := len(s)
			for j := i; j+1 < len(s); j++ {
				if starts[uint16(s[j])|uint16(s[j+1])<<8] != 0 {
					want = j
					break
				}
			}
			for name, scan := range scans {
				if got := nextStart(starts, scan, s, i); got != want {
					t.Fatalf("%s: nextStart(%q, %d) = %d, want %d", name, s, i, got, want)
				}
			}
		}
	})
}

// TestVectorFilter: the vector scan's filter passes every position where
// a match can start, and its candidates are exactly those of the
// filter's definition, for every pair of bytes at every offset of a
// block (the start, the middle, the last position, and the byte after it
// in the next block).
func TestVectorFilter(t *testing.T) {
	scan := vectorScan()
	if scan == nil {
		t.Skip("no vector scan on this processor")
	}
	starts := startPairs()
	for a := range 256 {
		for b := range 256 {
			if starts[uint16(a)|uint16(b)<<8] != 0 && !scan.candidate(string([]byte{byte(a), byte(b)}), 0) {
				t.Fatalf("pair %q can start a match but is no candidate", []byte{byte(a), byte(b)})
			}
		}
	}
	buf := []byte(strings.Repeat("x", 70))
	for _, at := range []int{0, 1, 15, 16, 30, 31} {
		for a := range 256 {
			for _, b := range []int{0, 'k', 'x', 0x80, 0xff, b2(a)} {
				buf[at], buf[at+1] = byte(a), byte(b)
				s := string(buf)
				pos, mask := scanCandidates(scan, s, 0)
				var want uint32
				for j := range 32 {
					if scan.candidate(s, j) {
						want |= 1 << j
					}
				}
				if want == 0 {
					// The block is clean: the scan goes on to the end.
					if mask != 0 || pos+33 <= len(s) {
						t.Fatalf("%q at %d: scan stopped at %d with mask %#x in a clean block", buf[at:at+2], at, pos, mask)
					}
				} else if pos != 0 || mask != want {
					t.Fatalf("%q at %d: scan at %d with mask %#x, want 0 and %#x", buf[at:at+2], at, pos, mask, want)
				}
				buf[at], buf[at+1] = 'x', 'x'
			}
		}
	}
}

// b2 is a second byte that makes a start with a, if any does.
func b2(a int) int {
	starts := startPairs()
	for b := range 256 {
		if starts[uint16(a)|uint16(b)<<8] != 0 {
			return b
		}
	}
	return 'x'
}
