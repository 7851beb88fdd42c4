#!/usr/bin/env bash
# bench/killtree.sh [N] [ROUNDS] [HERMES]: how long a kill of a job with N
# descendants takes past its grace (issue 38: 2,000 gone within 2 s of the
# grace), paired with the baseline of the same tree killed by hand (SIGTERM
# to the group, the same grace, SIGKILL to the group and to the escaped
# ones). The tree ignores SIGTERM, so both pay the whole grace; a tenth of
# it leaves the job's process group (setsid). Prints one row per round and
# the load average.
set -euo pipefail
n="${1:-2000}"
rounds="${2:-5}"
hermes="${3:-$(pwd)/bin/hermes}"
grace=5 # hermes kill's default (runner.DefaultKillGrace)
[ -x "$hermes" ] || { echo "build it first: go build -o bin/ ./cmd/hermes ./cmd/hermes-core" >&2; exit 2; }
work="$(mktemp -d)"
trap 'pkill -KILL -f "sleep 999[0-9]" 2>/dev/null || true; rm -rf "$work"' EXIT
export HERMES_HOME="$work/home"

# tree N TAG: the job's command: N sleepers (a tenth in sessions of their
# own) that ignore SIGTERM, then wait.
tree() {
	local n="$1" tag="$2"
	echo "trap '' TERM; for i in \$(seq $((n - n / 10))); do sleep $tag & done; for i in \$(seq $((n / 10))); do setsid sleep $tag & done; wait"
}
count() { pgrep -f -x "sleep $1" | wc -l; }
now() { date +%s.%N; }
# until_gone TAG: seconds until no sleeper of TAG is left.
until_gone() {
	while [ "$(count "$1")" -gt 0 ]; do sleep 0.02; done
}
until_up() {
	while [ "$(count "$1")" -lt "$2" ]; do sleep 0.05; done
}

printf '%-6s %12s %12s %8s\n' round hermes_past baseline_past ratio
for r in $(seq "$rounds"); do
	# hermes
	tag=9990$r
	id="$("$hermes" run -b -q -- "$(tree "$n" "$tag")")"
	until_up "$tag" "$n"
	t0=$(now)
	"$hermes" kill "$id" >/dev/null
	until_gone "$tag"
	h=$(echo "$(now) - $t0 - $grace" | bc)
	# baseline: the same tree, killed by hand
	tag=9991$r
	setsid bash -c "$(tree "$n" "$tag")" &
	pg=$!
	until_up "$tag" "$n"
	t0=$(now)
	kill -TERM -- "-$pg"
	sleep "$grace"
	kill -KILL -- "-$pg" 2>/dev/null || true
	pkill -KILL -f -x "sleep $tag" || true
	until_gone "$tag"
	wait "$pg" 2>/dev/null || true
	b=$(echo "$(now) - $t0 - $grace" | bc)
	printf '%-6s %11.3fs %11.3fs %8.2f\n' "$r" "$h" "$b" "$(echo "$h / $b" | bc -l)"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
