#!/usr/bin/env bash
# bench/cli-reads.sh [HERMES] [N]: the CLI's read paths beside the floor, in
# one paired, interleaved loop (issue 16): `log --json` of a receipt at the
# 200,000-character bound beside `cat` of its file, `ps --retained` of 1,000
# receipts beside `ls | wc -l` of their directory, and `poll` of a finished
# id beside a Go hello world. Medians, the ratio's interquartile range and
# the load average; a row measured at load above 3 is marked.
set -euo pipefail
# Binaries are built as released (scripts/release.sh): static, without cgo,
# which also starts faster (no dynamic loader, no libc threads).
export CGO_ENABLED=0
root="$(cd "$(dirname "$0")/.." && pwd)"
hermes="${1:-}" n="${2:-40}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [ -z "$hermes" ]; then
	(cd "$root" && go build -o "$tmp/" ./cmd/hermes ./cmd/hermes-core)
	hermes="$tmp/hermes"
else
	# The front and the CLI it execs, which sits beside it.
	cp "$hermes" "$tmp/hermes"
	cp "$(dirname "$hermes")/hermes-core" "$tmp/hermes-core"
	hermes="$tmp/hermes"
fi
printf 'package main\nimport "fmt"\nfunc main() { fmt.Println("hi") }\n' >"$tmp/hello.go"
(cd "$tmp" && go mod init hello >/dev/null 2>&1 && go build -o "$tmp/hello" hello.go)
export HERMES_HOME="$tmp/home"
# The store keeps 1,000 receipts: the big one last, so that it stays.
for i in $(seq 999); do "$hermes" run -- true >/dev/null; done 2>/dev/null || true
big="$("$hermes" --json run -- "yes 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789 | head -c 200000" | python3 -c 'import sys, json; print(json.load(sys.stdin)["session_id"])')"
file="$HERMES_HOME/logs/process-results/$big.json"
[ -f "$file" ] || { echo "no receipt file at $file" >&2; exit 1; }
dir="$(dirname "$file")"
python3 - "$hermes" "$n" "$big" "$file" "$dir" "$tmp/hello" <<'PY'
import os, statistics, subprocess, sys, time
hermes, n, big, file, d, hello = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
rows = [
    ('log --json (200,000 chars)', [hermes, '--json', 'log', big], ['cat', file]),
    ('ps --retained (1,000)', [hermes, '--json', 'ps', '--retained'], ['sh', '-c', 'ls "$0" | wc -l', d]),
    ('poll (finished)', [hermes, '--json', 'poll', big], [hello]),
]
def once(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t) * 1000
print(f"{'row':30} {'hermes ms':>10} {'floor ms':>9} {'ratio':>6}  IQR          load")
for name, h, base in rows:
    hs, bs, rs = [], [], []
    for i in range(n):
        pair = [(h, hs), (base, bs)] if i % 2 == 0 else [(base, bs), (h, hs)]
        got = {}
        for cmd, acc in pair:
            v = once(cmd); acc.append(v); got[id(acc)] = v
        rs.append(got[id(hs)] / got[id(bs)])
    q = statistics.quantiles(rs, n=4)
    load = os.getloadavg()[0]
    mark = '' if load <= 3 else '  (load above 3: not a result)'
    print(f"{name:30} {statistics.median(hs):10.2f} {statistics.median(bs):9.2f} {statistics.median(rs):6.2f}  {q[0]:.2f}-{q[2]:.2f}  {load:5.2f}{mark}")
PY
