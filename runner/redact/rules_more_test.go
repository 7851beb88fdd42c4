package redact_test

import (
	"strings"
	"testing"

	"github.com/hermesrun/hermes/runner/redact"
)

func TestWiderRules(t *testing.T) {
	const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		name, in, want string
	}{
		{"ansi inside a key", "key sk-ant-api03-\x1b[0mAbCdEfGhIjKlMnOpQrStUvWx done", "key sk-*** done"},
		{"ansi colours around a key stay", "\x1b[32msk-proj-AbCdEfGhIjKlMnOpQrStUv\x1b[0m", "\x1b[32msk-***\x1b[0m"},
		{"sshpass -p", "sshpass -p hunter2 ssh host", "sshpass -p *** ssh host"},
		{"docker login -p", "docker login -u me -p s3cr3t registry", "docker login -u me -p *** registry"},
		{"mysql attached", "mysql -u root -pS3cretPass db", "mysql -u root -p*** db"},
		{"mysql separate", "mysql -u root -p hunter2 db", "mysql -u root -p *** db"},
		{"redis-cli -a", "redis-cli -a hunter2hunter2 ping", "redis-cli -a *** ping"},
		{"curl -u", "curl -u alice:pa55word https://x", "curl -u alice:*** https://x"},
		{"curl -u attached", "curl -ualice:pa55word https://x", "curl -ualice:*** https://x"},
		{"slack webhook", "POST https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX", "POST https://hooks.slack.com/services/***"},
		{"sendgrid", "SG.abcdefghijklmnopqrstuv.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopq", "SG.***"},
		{"stripe restricted", "rk_live_abcdefghijklmnopqrstuvwx", "rk_live_***"},
		{"azure account key", "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc+def/ghi==;EndpointSuffix=x", "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=***"},
		{"google oauth", "token ya29.a0AfH6SMBxxxxxxxxxxxxxxxxxxxxxxxx", "token ya29.***"},
		{"databricks", "dapi0123456789abcdef0123456789abcdef", "dapi***"},
		{"digitalocean", "dop_v1_" + hex64, "dop_v1_***"},
		{"groq", "gsk_abcdefghijklmnopqrstuvwxyz012345", "gsk_***"},
		{"replicate", "r8_abcdefghijklmnopqrstuvwxyz0123", "r8_***"},
		{"perplexity", "pplx-abcdefghijklmnopqrstuvwxyz0123456789", "pplx-***"},
		{"pypi", "pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0", "pypi-***"},
		// Left alone: the same letters in ordinary use.
		{"ssh port", "ssh -p 22 host", "ssh -p 22 host"},
		{"mkdir parents", "mkdir -p build/out", "mkdir -p build/out"},
		{"docker port", "docker run -p 8080:80 nginx", "docker run -p 8080:80 nginx"},
		{"bundled flags", "cp -pr a b; rsync -pavz x y", "cp -pr a b; rsync -pavz x y"},
		{"curl user without password", "curl -u alice https://x", "curl -u alice https://x"},
		{"words", "dapper pypi-less r8_ gsk_test SG.x yarn", "dapper pypi-less r8_ gsk_test SG.x yarn"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := redact.String(tc.in)
			if got != tc.want {
				t.Fatalf("redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if again := redact.String(got); again != got {
				t.Fatalf("not idempotent: %q -> %q", got, again)
			}
		})
	}
}

func TestWiderRulesStayLinear(t *testing.T) {
	// Pathological inputs for the new triggers: each rule's scan is bounded
	// or consuming, so this stays fast (a quadratic rule would take seconds).
	for _, unit := range []string{"-p ", "-pa", "\x1b[", "dapi", "hooks.slack.com/services/", "SG.", "-u a:"} {
		s := strings.Repeat(unit, 200_000/len(unit))
		_ = redact.String(s)
	}
}
