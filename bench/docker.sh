#!/usr/bin/env bash
# Start latency of the docker backend next to the docker CLI, same image,
# same engine, same script.
#
#   bench/docker.sh            # N=20 runs of each
#   N=50 bench/docker.sh
#
# Rows (all on the same image, N runs each, medians compared):
#   cli run -d (plain)         docker run -d IMG sleep 60             start-to-running
#   cli run -d (same flags)    the same with the backend's security and
#                              resource flags spelled for the CLI
#   backend Start              New + Start + PID, a fresh engine client
#                              each run (BenchmarkDockerStart)        start-to-running
#   cli run --rm (plain)       docker run --rm IMG echo done          start-to-exit+removal
#   cli run --rm (same flags)  the same with the backend's flags
#   backend run to exit        New + Start + output + Wait + Cleanup
#                              (BenchmarkDockerRunToExit)             start-to-exit+removal
#
# The target is backend Start <= 1.2x cli run -d (plain). The CLI can only
# say --network none, for which the engine allocates a null endpoint (a
# store transaction); the backend asks for no network at all, which gives
# the same loopback-only namespace without it. CLI rows include the docker
# CLI's process start; backend rows run in one test binary, so they include
# a new connection and API version negotiation per run but no process exec.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
N="${N:-20}"
IMAGE="${IMAGE:-hermes-test-busybox:latest}"
command -v go >/dev/null || PATH="/usr/local/go/bin:$PATH"

if [ -x scripts/ci/start-docker.sh ]; then
	scripts/ci/start-docker.sh
fi
docker info >/dev/null 2>&1 || { echo "docker engine not answering (DOCKER_HOST=${DOCKER_HOST:-unset})" >&2; exit 1; }
if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
	if [ -x scripts/ci/build-test-image.sh ]; then
		scripts/ci/build-test-image.sh
	else
		ctx="$(mktemp -d)"
		cp /bin/busybox "$ctx/busybox"
		printf 'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\n' >"$ctx/Dockerfile"
		docker build -q -t "$IMAGE" "$ctx" >/dev/null
		rm -rf "$ctx"
	fi
fi

# The backend's defaults, spelled as CLI flags.
same_flags=(--network none --init --cap-drop ALL --security-opt no-new-privileges
	--memory 1g --memory-swap 1g --cpus 1 --pids-limit 512
	--log-driver json-file --log-opt max-size=10m --log-opt max-file=2
	--label hermes.bench=1)

now_ns() { date +%s%N; }

# stats NAME < milliseconds-per-line: prints the median, mean, min and max,
# and keeps the median in med[NAME] for the ratios.
declare -A med
stats() {
	local name="$1" nums
	nums="$(sort -n | awk '
		{ v[NR] = $1; sum += $1 }
		END {
			m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%.1f %.1f %.1f %.1f\n", m, sum / NR, v[1], v[NR]
		}')"
	med["$name"]="${nums%% *}"
	# shellcheck disable=SC2086 # four numbers, split on purpose
	printf '%-26s median %7.1f ms  mean %7.1f ms  min %7.1f  max %7.1f\n' "$name" $nums
}

# Each function below takes one sample and prints it in milliseconds.
ms_since() { echo "$(( ($(now_ns) - $1) / 1000 ))" | awk '{ print $1 / 1000 }'; }

cli_detached() { # extra flags...
	local t0 id
	t0=$(now_ns)
	id=$(docker run -d "$@" "$IMAGE" sleep 60)
	ms_since "$t0"
	docker rm -f "$id" >/dev/null
}

cli_rm() { # extra flags...
	local t0
	t0=$(now_ns)
	docker run --rm "$@" "$IMAGE" echo done >/dev/null
	ms_since "$t0"
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
go test -c -o "$work/docker.test" ./backends/docker
go_bench() { # benchmark name
	rm -f "$work/samples"
	(cd backends/docker && HERMES_BENCH_SAMPLES="$work/samples" "$work/docker.test" \
		-test.run '^$' -test.bench "^$1\$" -test.benchtime 1x >"$work/bench.log") ||
		{ cat "$work/bench.log" >&2; return 1; }
	cat "$work/samples"
}

echo "docker backend start latency: N=$N, image $IMAGE, engine $(docker version --format '{{.Server.Version}}'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
# One untimed run warms the image and the engine's caches.
docker rm -f "$(docker run -d "${same_flags[@]}" "$IMAGE" true)" >/dev/null
go_bench BenchmarkDockerStart >/dev/null

# Rounds interleave the rows, so that load from elsewhere on the machine
# falls on all of them alike.
rows=("cli run -d (plain)" "cli run -d (same flags)" "backend Start"
	"cli run --rm (plain)" "cli run --rm (same flags)" "backend run to exit")
for ((i = 0; i < N; i++)); do
	cli_detached >>"$work/r0"
	cli_detached "${same_flags[@]}" >>"$work/r1"
	go_bench BenchmarkDockerStart >>"$work/r2"
	cli_rm >>"$work/r3"
	cli_rm "${same_flags[@]}" >>"$work/r4"
	go_bench BenchmarkDockerRunToExit >>"$work/r5"
done
for j in "${!rows[@]}"; do
	stats "${rows[$j]}" <"$work/r$j"
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
echo
echo "backend Start / cli run -d (plain):               $(ratio "${med[backend Start]}" "${med[cli run -d (plain)]}")  (target <= 1.20x)"
echo "backend Start / cli run -d (same flags):          $(ratio "${med[backend Start]}" "${med[cli run -d (same flags)]}")"
echo "backend run to exit / cli run --rm (plain):      $(ratio "${med[backend run to exit]}" "${med[cli run --rm (plain)]}")"
echo "backend run to exit / cli run --rm (same flags): $(ratio "${med[backend run to exit]}" "${med[cli run --rm (same flags)]}")"
