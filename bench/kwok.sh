#!/usr/bin/env bash
# bench/kwok.sh [N] [NODES]: N pod jobs at once (default 2000) on NODES
# simulated nodes (default 50, KWOK: scripts/ci/start-kwok.sh) through two
# runner replicas on one Redis, beside a bare client-go create-and-watch
# loop at the same concurrency, as paired rounds (bench/kube/sim.go): start
# throughput, create-to-end, API server requests per job, the runners' RSS
# per live job and Redis memory per receipt. Needs the test cluster
# (scripts/ci/start-k8s.sh) and Redis (scripts/ci/start-redis.sh). KILL=1
# SIGKILLs the second runner once the last round's jobs have started: the
# first must record every end, each once. CREATE_ONLY=1 lets the bare
# loop's workers create without waiting for their pods to run. PROTOBUF=1
# has the bare loop speak protobuf to the API server, as hermes does (its
# default is client-go's, JSON). DURATION (default 120s) is how long each
# job runs: long enough that all 2,000 run at once here (their starts take
# about 40 s), so that no job's end (its log read, delete and receipt,
# which the bare loop does not do) shares the window with the starts.
# HERMES_SIM_PHASES=1 splits each side's starts into phases (create,
# schedule, run, answer) seen by one watch, with the CPU each process of
# the machine spent in the round (bench/kube/simclock.go); with
# HERMES_SIM_PROFILE=DIR also 20 s CPU profiles of the API server and the
# runners from each round's start.
set -euo pipefail
export CGO_ENABLED=0
cd "$(dirname "$0")/.."
n="${1:-2000}"
nodes="${2:-50}"
state="${HERMES_CI_STATE_DIR:-/tmp/hermes-ci}"
redis="${HERMES_TEST_REDIS_URL:-redis://127.0.0.1:6390/0}"
export KUBECONFIG="${KUBECONFIG:-$state/k8s/admin.kubeconfig}"
HERMES_KWOK_NODES="$nodes" bash scripts/ci/start-kwok.sh >/dev/null
tmp="$(mktemp -d)"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
go build -o "$tmp/" ./cmd/hermes ./cmd/hermes-core
go build -o "$tmp/kube" ./bench/kube
serve() { # serve NAME PORT
	mkdir -p "$tmp/$1"
	cat >"$tmp/$1/config.yaml" <<YAML
store:
  redis_url: $redis
  prefix: "hermes:{bench-kwok-$$}:"
  # Every round's receipts are kept, so that each job's can be counted
  # (the default cap of 1,000 would drop them, and their completions).
  max_retained_results: $((n * ${ROUNDS:-3} + 1000))
terminal:
  env: kubernetes
  kubernetes:
    kubeconfig: $KUBECONFIG
    image: hermes.local/simulated:1
    node_selector: {type: kwok}
    tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
YAML
	# Go profiles on PORT+1000 (go tool pprof http://127.0.0.1:18081/debug/pprof/heap)
	# for a round that stalls or grows.
	HERMES_HOME="$tmp/$1" "$tmp/hermes" serve --listen "127.0.0.1:$2" --debug-listen "127.0.0.1:$(($2 + 1000))" \
		--backends kubernetes 2>"$tmp/$1.log" &
	pids+=($!)
	for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$2/healthz" >/dev/null 2>&1 && return; sleep 0.1; done
	echo "runner $1 did not start" >&2
	exit 1
}
serve a 17081
serve b 17082
"$tmp/kube" -sim "$n" -concurrency "${CONCURRENCY:-64}" -rounds "${ROUNDS:-3}" -sim-duration "${DURATION:-120s}" \
	-runners http://127.0.0.1:17081,http://127.0.0.1:17082 -runner-pids "${pids[0]},${pids[1]}" \
	-runner-debug http://127.0.0.1:18081,http://127.0.0.1:18082 -redis "$redis" \
	${KILL:+-kill-replica} ${CREATE_ONLY:+-create-only} ${PROTOBUF:+-protobuf}
