#!/usr/bin/env bash
# Start latency of hermes's docker backend next to the docker CLI: same
# image, same engine, same script, rounds interleaved.
#
#   bench/docker.sh            # N=20 samples of each row
#   N=50 bench/docker.sh
#
# Rows (all on the same image, N samples each, medians compared):
#   cli run -d (plain)         docker run -d IMG true                 start-to-running
#   cli run -d (same flags)    the same with the backend's security and
#                              resource flags spelled for the CLI
#   hermes run -b              hermes run --background --backend docker
#                              --image IMG -- true, until the CLI has
#                              printed the start receipt              start-to-running
#   hermes run -b (sleep 60)   the same for `sleep 60`, a job still
#                              running when the start receipt is built
#   backend Start              New + Start + PID of `sleep 60`, a fresh
#                              engine client each run, in one Go test
#                              binary (BenchmarkDockerStart)          start-to-running
#   cli run --rm (plain)       docker run --rm IMG echo done          start-to-exit+removal
#   cli run --rm (same flags)  the same with the backend's flags
#   hermes run (foreground)    hermes run --backend docker --image IMG
#                              -- echo done, until it exits: receipt
#                              stored, container removed              start-to-receipt
#   backend run to exit        New + Start + output + Wait + Cleanup
#                              (BenchmarkDockerRunToExit)             start-to-exit+removal
#
# The target (issue 5) is hermes run -b <= 1.2x cli run -d (plain). The CLI
# can only say --network none, for which the engine allocates a null
# endpoint (a store transaction); the backend asks for no network at all,
# which gives the same loopback-only namespace without it. The CLI rows,
# docker's and hermes's, include their own process start; the backend rows
# include a new connection and API version negotiation per sample but no
# exec. After each hermes run -b sample the script waits, untimed, until
# the detached `hermes watch` has written the receipt and removed the
# container, so that its work does not fall on the next sample.
set -euo pipefail
# Binaries are built as released (scripts/release.sh): static, without cgo,
# which also starts faster (no dynamic loader, no libc threads).
export CGO_ENABLED=0

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
	id=$(docker run -d "$@" "$IMAGE" true)
	ms_since "$t0"
	docker rm -f "$id" >/dev/null
}

# gone_within ID: waits (up to 60 s) until no container is labelled with
# hermes process ID, i.e. its watcher recorded it and removed it.
gone_within() {
	local i
	for ((i = 0; i < 1200; i++)); do
		[ -z "$(docker ps -aq --filter "label=hermes.id=$1")" ] && return 0
		sleep 0.05
	done
	echo "container of $1 still there after 60 s" >&2
	return 1
}

hermes_detached() { # command...
	local t0 out id
	t0=$(now_ns)
	out=$("$work/hermes" --json run --background --backend docker --image "$IMAGE" -- "$@")
	ms_since "$t0"
	id=$(sed -n 's/.*"session_id":"\(proc_[0-9a-f]*\)".*/\1/p' <<<"$out")
	[ -n "$id" ] || { echo "no start receipt: $out" >&2; return 1; }
	[ "$1" = true ] || "$work/hermes" kill "$id" >/dev/null
	gone_within "$id"
	[ -f "$HERMES_HOME/logs/process-results/$id.json" ] || { echo "no receipt for $id" >&2; return 1; }
}

hermes_foreground() {
	local t0
	t0=$(now_ns)
	"$work/hermes" run --backend docker --image "$IMAGE" -- echo done >/dev/null
	ms_since "$t0"
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
go build -o "$work/" ./cmd/hermes ./cmd/hermes-core
# A profile of its own: the receipts and watchers of the samples land here.
export HERMES_HOME="$work/home"
unset HERMES_SESSION_ID HERMES_RUNNER_URL HERMES_REDIS_URL OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
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
hermes_detached true >/dev/null
hermes_foreground >/dev/null

# Rounds interleave the rows, so that load from elsewhere on the machine
# falls on all of them alike.
rows=("cli run -d (plain)" "cli run -d (same flags)" "hermes run -b" "hermes run -b (sleep 60)" "backend Start"
	"cli run --rm (plain)" "cli run --rm (same flags)" "hermes run (foreground)" "backend run to exit")
for ((i = 0; i < N; i++)); do
	cli_detached >>"$work/r0"
	cli_detached "${same_flags[@]}" >>"$work/r1"
	hermes_detached true >>"$work/r2"
	hermes_detached sleep 60 >>"$work/r3"
	go_bench BenchmarkDockerStart >>"$work/r4"
	cli_rm >>"$work/r5"
	cli_rm "${same_flags[@]}" >>"$work/r6"
	hermes_foreground >>"$work/r7"
	go_bench BenchmarkDockerRunToExit >>"$work/r8"
done
for j in "${!rows[@]}"; do
	stats "${rows[$j]}" <"$work/r$j"
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
# paired J K: the median over rounds of row J's sample / row K's sample of
# the same round; it cancels the load swings that rounds share.
paired() {
	paste "$work/r$1" "$work/r$2" | awk '{ print $1 / $2 }' | sort -n | awk '
		{ v[NR] = $1 }
		END { printf "%.2fx", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo
echo "ratios of medians, and (paired) the median of per-round ratios:"
echo "hermes run -b / cli run -d (plain):                   $(ratio "${med[hermes run -b]}" "${med[cli run -d (plain)]}")  paired $(paired 2 0)  (target <= 1.20x)"
echo "hermes run -b (sleep 60) / cli run -d (plain):        $(ratio "${med[hermes run -b (sleep 60)]}" "${med[cli run -d (plain)]}")  paired $(paired 3 0)"
echo "hermes run -b / cli run -d (same flags):              $(ratio "${med[hermes run -b]}" "${med[cli run -d (same flags)]}")  paired $(paired 2 1)"
echo "backend Start / cli run -d (plain):                   $(ratio "${med[backend Start]}" "${med[cli run -d (plain)]}")  paired $(paired 4 0)"
echo "hermes run (foreground) / cli run --rm (plain):       $(ratio "${med[hermes run (foreground)]}" "${med[cli run --rm (plain)]}")  paired $(paired 7 5)"
echo "hermes run (foreground) / cli run --rm (same flags):  $(ratio "${med[hermes run (foreground)]}" "${med[cli run --rm (same flags)]}")  paired $(paired 7 6)"
echo "backend run to exit / cli run --rm (plain):           $(ratio "${med[backend run to exit]}" "${med[cli run --rm (plain)]}")  paired $(paired 8 5)"
