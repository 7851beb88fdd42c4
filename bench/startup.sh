#!/usr/bin/env bash
# bench/startup.sh [HERMES] [N]: what every hermes process pays before it
# does anything (issue 16). CPU (user+sys, from the children's rusage) and
# wall time of `hermes --version`, an idle `hermes ps`, and `hermes run -b
# -- true`, each paired in an interleaved loop with its floor: a Go hello
# world for the first two, `tsp true` for the last (when task-spooler is
# installed). BASE=path/to/older/hermes adds that binary's rows in the
# same loop, so a change is measured against its parent under one load.
# Medians, the ratio's interquartile range and the load average; a row
# measured at load above 3 is marked as no result.
set -euo pipefail
# Binaries are built as released (scripts/release.sh): static, without cgo,
# which also starts faster (no dynamic loader, no libc threads).
export CGO_ENABLED=0
root="$(cd "$(dirname "$0")/.." && pwd)"
hermes="${1:-}" n="${2:-60}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [ -z "$hermes" ]; then
	(cd "$root" && go build -o "$tmp/" ./cmd/hermes ./cmd/hermes-core)
	hermes="$tmp/hermes"
fi
printf 'package main\nimport "fmt"\nfunc main() { fmt.Println("hi") }\n' >"$tmp/hello.go"
(cd "$tmp" && go mod init hello >/dev/null 2>&1 && go build -o "$tmp/hello" hello.go)
export HERMES_HOME="$tmp/home" TS_SOCKET="$tmp/tsp.sock" TS_MAXFINISHED=1000
python3 - "$hermes" "$n" "$tmp/hello" "${BASE:-}" <<'PY'
import os, resource, shutil, statistics, subprocess, sys, time
hermes, n, hello, base = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def rows_of(h, tag):
    out = [(f'{tag}--version', [h, '--version'], [hello]),
           (f'{tag}ps (idle)', [h, 'ps'], [hello])]
    if shutil.which('tsp'):
        out.append((f'{tag}run -b -- true', [h, 'run', '-b', '--', 'true'], ['tsp', 'true']))
    return out
rows = rows_of(hermes, '') + (rows_of(base, 'BASE ') if base else [])
# A figure taken on a loaded machine is no result: wait for a quiet one.
deadline = time.time() + float(os.environ.get('LOAD_WAIT', '300'))
while os.getloadavg()[0] > 3 and time.time() < deadline:
    time.sleep(5)
def once(cmd):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = (time.perf_counter() - t) * 1000
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000
res = {name: ([], [], [], []) for name, _, _ in rows}
for i in range(n):  # rows interleaved within a round, order alternating
    for name, h, b in (rows if i % 2 == 0 else rows[::-1]):
        hw, hc = once(h); bw, bc = once(b)
        acc = res[name]; acc[0].append(hw); acc[1].append(hc); acc[2].append(bw); acc[3].append(bc)
load = os.getloadavg()[0]
mark = '' if load <= 3 else '  (load above 3: not a result)'
print(f"{'row':22} {'wall ms':>8} {'floor':>7} {'ratio':>6} {'IQR':>11}  {'CPU ms':>7} {'floor':>6} {'ratio':>6}  load")
for name, _, _ in rows:
    hw, hc, bw, bc = res[name]
    r = [a / b for a, b in zip(hw, bw)]
    q = statistics.quantiles(r, n=4)
    cpu_ratio = statistics.median(hc) / max(statistics.median(bc), 1e-3)
    print(f"{name:22} {statistics.median(hw):8.2f} {statistics.median(bw):7.2f} {statistics.median(r):6.2f} {q[0]:5.2f}-{q[2]:5.2f}  {statistics.median(hc):7.2f} {statistics.median(bc):6.2f} {cpu_ratio:6.2f}  {load:.2f}{mark}")
PY
