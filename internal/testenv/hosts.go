package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// AgentHostsInstall is the command that installs the agent hosts
// test/agenthosts pins (Claude Code and Codex), run from the repository
// root. scripts/ci/npm-tools.sh runs it, then Claude Code's install.cjs
// when an npm that skips install scripts left its placeholder binary.
const AgentHostsInstall = "npm ci --prefix test/agenthosts --no-audit --no-fund"

// TmuxInstall says how to get tmux.
const TmuxInstall = "apt-get install tmux, or scripts/ci/install-packages.sh"

// agentHostsDir is where the hosts are pinned, in the repository.
const agentHostsDir = "test/agenthosts"

// ClaudeCode returns the native Claude Code executable installed in
// test/agenthosts at the pinned version, or skips the test (fails it under
// CI). The npm package's bin/claude.exe is a placeholder until its
// postinstall copies the platform's binary over it; that copy is what runs,
// with no Node.js in between.
func ClaudeCode(t testing.TB) string {
	t.Helper()
	dir := agentHosts(t)
	pkg := filepath.Join(dir, "node_modules", "@anthropic-ai", "claude-code")
	exe := filepath.Join(pkg, "bin", "claude.exe")
	if !isNative(exe) {
		unavailable(t, "Claude Code", "%s is not the native binary (the placeholder its postinstall replaces); run: node %s",
			exe, filepath.Join(pkg, "install.cjs"))
	}
	return exe
}

// Codex returns the native Codex executable installed in test/agenthosts
// at the pinned version, or skips the test (fails it under CI). The npm
// package's codex.js only finds this binary in the platform package and
// executes it.
func Codex(t testing.TB) string {
	t.Helper()
	dir := agentHosts(t)
	triple, plat := codexTarget()
	if triple == "" {
		unavailable(t, "Codex", "no Codex build for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	exe := filepath.Join(dir, "node_modules", "@openai", "codex-"+plat, "vendor", triple, "bin", "codex")
	if !isNative(exe) {
		unavailable(t, "Codex", "%s missing; install it with: %s", exe, AgentHostsInstall)
	}
	return exe
}

// Tmux returns the tmux executable, which the tests that drive the hosts'
// terminal UIs run them in.
func Tmux(t testing.TB) string {
	t.Helper()
	return Tool(t, "tmux", TmuxInstall)
}

// agentHosts is the test/agenthosts directory once its pinned packages are
// installed there.
func agentHosts(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		unavailable(t, "agent hosts", "%v", err)
	}
	dir := filepath.Join(root, filepath.FromSlash(agentHostsDir))
	if err := checkPinned(dir); err != nil {
		unavailable(t, "agent hosts", "%v; install them with: %s", err, AgentHostsInstall)
	}
	return dir
}

// codexTarget is the Rust target triple and npm platform suffix of Codex's
// binary for this machine, as its codex.js maps them.
func codexTarget() (triple, platform string) {
	arch := map[string][2]string{"amd64": {"x86_64", "x64"}, "arm64": {"aarch64", "arm64"}}[runtime.GOARCH]
	if arch[0] == "" {
		return "", ""
	}
	switch runtime.GOOS {
	case "linux":
		return arch[0] + "-unknown-linux-musl", "linux-" + arch[1]
	case "darwin":
		return arch[0] + "-apple-darwin", "darwin-" + arch[1]
	}
	return "", ""
}

// isNative reports whether path is an executable binary of this OS: an ELF
// on Linux, a Mach-O on macOS.
func isNative(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := f.Read(magic); err != nil {
		return false
	}
	if fi, err := f.Stat(); err != nil || fi.Mode().Perm()&0o111 == 0 {
		return false
	}
	switch runtime.GOOS {
	case "darwin":
		return bytes.Equal(magic, []byte{0xcf, 0xfa, 0xed, 0xfe}) || bytes.Equal(magic, []byte{0xca, 0xfe, 0xba, 0xbe})
	default:
		return bytes.Equal(magic, []byte("\x7fELF"))
	}
}
