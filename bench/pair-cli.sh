#!/usr/bin/env bash
# bench/pair-cli.sh OLD NEW [N]: tightly paired CLI timings of two hermes
# binaries (each iteration runs both, alternating which goes first, so that
# drift in load falls on both alike); medians and the new/old ratio with its
# interquartile range. Both binaries are copied fresh first: a binary as the
# linker wrote it starts up to 9% slower than a copy of itself (see
# RESULTS.md, "The architecture step costs nothing").
set -euo pipefail
old="$1" new="$2" n="${3:-40}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp "$old" "$tmp/h-old"
cp "$new" "$tmp/h-new"
export HERMES_HOME="$tmp/home"
id="$("$tmp/h-new" --json run -b -- 'echo hi' | python3 -c 'import sys, json; print(json.load(sys.stdin)["session_id"])')"
"$tmp/h-new" wait "$id" >/dev/null
python3 - "$tmp" "$n" "$id" <<'PY'
import statistics, subprocess, sys, time
tmp, n, pid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cmds = {
    'run -- true': ['run', '--', 'true'],
    'run -b -- true': ['run', '-b', '--', 'true'],
    'poll (finished)': ['--json', 'poll', pid],
    'ps': ['--json', 'ps'],
    '--version': ['--version'],
}
for name, args in cmds.items():
    t = {'old': [], 'new': []}
    for i in range(n):
        for v in (['old', 'new'] if i % 2 == 0 else ['new', 'old']):
            s = time.perf_counter()
            subprocess.run([f'{tmp}/h-{v}'] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            t[v].append(time.perf_counter() - s)
    r = [a / b for a, b in zip(t['new'], t['old'])]
    q = statistics.quantiles(r, n=4)
    load = open('/proc/loadavg').read().split()[0]
    print(f"{name:16} old {statistics.median(t['old'])*1000:.1f} ms, new {statistics.median(t['new'])*1000:.1f} ms, "
          f"new/old {statistics.median(r):.3f} (IQR {q[0]:.3f}-{q[2]:.3f}), load {load}")
PY
