#!/usr/bin/env bash
# bench/serve_starts.sh [PAIRS] [HERMES...]: issue 16's serve row alone
# (bench/issue16.sh row 4): 8 HTTP clients POST {"command":"true",
# "backend":"local"} to /v1/processes in bursts of 160, paired burst by
# burst with 8 threads running `bash -c true`. With several hermes
# binaries (say, one built from main and one from a branch) their bursts
# take turns in every pair, so that they are compared under the same load.
# Each binary serves its own fresh profile. PAIRS defaults to 6; with no
# binary given, ./cmd/hermes and ./cmd/hermes-core are built. Like issue16.sh it waits for a load
# average below 3 (LOAD_WAIT seconds, default 300) and prints the load.
set -euo pipefail
# Binaries are built as released (scripts/release.sh): static, without cgo,
# which also starts faster (no dynamic loader, no libc threads).
export CGO_ENABLED=0
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
command -v go >/dev/null || PATH="/usr/local/go/bin:$PATH"
pairs="${1:-6}"
shift || true
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
	go build -o "$tmp/" ./cmd/hermes ./cmd/hermes-core
	bins=("$tmp/hermes")
fi
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -sr), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
PYTHONPATH="$root/bench" python3 - "$tmp" "$pairs" "${bins[@]}" <<'PY'
import os, statistics, sys, time
from servebench import burst, exec_start, http_start, serve, stop_supervisors
tmp, pairs, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

deadline = time.time() + float(os.environ.get('LOAD_WAIT', '300'))
while os.getloadavg()[0] > 3 and time.time() < deadline:
    time.sleep(5)
before = os.getloadavg()[0]

servers = [serve(exe, f'{tmp}/home{i}') for i, exe in enumerate(bins)]
rates = [[] for _ in bins]; ratios = [[] for _ in bins]; base = []
for k in range(pairs):
    order = list(range(len(bins))) + ['bash']
    if k % 2: order.reverse()
    got = {}
    for o in order:
        if o == 'bash':
            got[o] = burst(exec_start)
        else:
            got[o] = burst(lambda a=servers[o][1]: http_start(a))
    base.append(got['bash'])
    for i in range(len(bins)):
        rates[i].append(got[i]); ratios[i].append(got[i] / got['bash'])
after = os.getloadavg()[0]
for srv, _ in servers:
    srv.terminate(); srv.wait()
stop_supervisors(f'{tmp}/')
print(f'bash -c true, 8 threads: median {statistics.median(base):.0f} starts/s')
for i, exe in enumerate(bins):
    q = statistics.quantiles(ratios[i], n=4) if pairs > 1 else [ratios[i][0]] * 3
    print(f'{exe}: median {statistics.median(rates[i]):.0f} jobs/s (bursts: {", ".join(f"{r:.0f}" for r in rates[i])}), '
          f'{statistics.median(ratios[i]):.2f}x bash (IQR {q[0]:.2f}-{q[2]:.2f})')
mark = '' if before <= 3 else ' (no result: load above 3 before the run)'
print(f'load before {before:.2f}, after {after:.2f}{mark}')
PY
