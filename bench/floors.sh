#!/usr/bin/env bash
# bench/floors.sh [N]: what a Go binary pays to start for what it links
# (issue 16). It builds one `main` per set of imports (blank imports only,
# so the cost is the packages' initialisation and the binary's size), plus
# hermes itself, and runs each N times (default 30) in one interleaved
# loop: median wall and CPU (children's rusage) and the ratio to a hello
# world. A figure taken at a load above 3 is marked as no result.
set -euo pipefail
# Binaries are built as released (scripts/release.sh): static, without cgo,
# which also starts faster (no dynamic loader, no libc threads).
export CGO_ENABLED=0
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-30}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mk() { # name imports...
	local d="$tmp/src/$1"
	shift
	mkdir -p "$d"
	{
		echo "package main"
		echo "import ("
		for p in "$@"; do echo "	_ \"$p\""; done
		echo ")"
		echo "func main() {}"
	} >"$d/main.go"
}
core="github.com/alecthomas/kong github.com/redis/go-redis/v9 go.opentelemetry.io/otel/sdk/trace go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp go.yaml.in/yaml/v3 golang.org/x/sys/unix"
heavy="github.com/docker/docker/client k8s.io/client-go/rest k8s.io/client-go/tools/clientcmd k8s.io/client-go/tools/remotecommand k8s.io/api/core/v1 go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc github.com/modelcontextprotocol/go-sdk/mcp"
mk hello
mk kong github.com/alecthomas/kong
# shellcheck disable=SC2086 # word splitting of the import lists is meant
mk core $core
# shellcheck disable=SC2086
mk all-imports $core $heavy
(
	cd "$root"
	for d in hello kong core all-imports; do
		cp -r "$tmp/src/$d" "$root/.floors-$d"
		go build -o "$tmp/$d" "./.floors-$d" || { rm -rf "$root/.floors-$d"; exit 1; }
		rm -rf "$root/.floors-$d"
	done
	go build -o "$tmp/" ./cmd/hermes ./cmd/hermes-core
)
python3 - "$tmp" "$n" <<'PY'
import os, resource, statistics, subprocess, sys, time
tmp, n = sys.argv[1], int(sys.argv[2])
rows = [('hello world', [f'{tmp}/hello']), ('kong', [f'{tmp}/kong']),
        ('kong, go-redis, OTel SDK + OTLP/HTTP, yaml, x/sys', [f'{tmp}/core']),
        ('those + Docker client, client-go, OTLP/gRPC, MCP SDK', [f'{tmp}/all-imports']),
        ('hermes --version', [f'{tmp}/hermes', '--version'])]
la = os.getloadavg()[0]
wall = {r[0]: [] for r in rows}; cpu = {r[0]: [] for r in rows}
for i in range(n):
    for name, cmd in (rows if i % 2 == 0 else rows[::-1]):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        wall[name].append((time.perf_counter() - t) * 1000)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[name].append((r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1000)
la2 = os.getloadavg()[0]
base = statistics.median(wall['hello world'])
print(f'| binary | size MB | wall ms | CPU ms | x hello (wall) |')
print('|---|---:|---:|---:|---:|')
for name, cmd in rows:
    size = os.path.getsize(cmd[0]) / 1e6
    w = statistics.median(wall[name])
    print(f'| {name} | {size:.1f} | {w:.2f} | {statistics.median(cpu[name]):.2f} | {w / base:.2f} |')
note = '' if max(la, la2) <= 3 else ' (above 3: no result)'
print(f'load {la:.2f} -> {la2:.2f}{note}')
PY
