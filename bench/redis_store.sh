#!/usr/bin/env bash
# Receipts written and read per second through the Redis receipt store,
# next to redis-benchmark's plain SET and GET on the same server.
#
# Starts a private redis-server (no persistence) on a free loopback port,
# runs `redis-benchmark -t set,get -n 100000 -q` against it, then the Go
# benchmarks BenchmarkRedisStorePut/Get for the same number of operations
# with as many concurrent callers (50) as redis-benchmark has clients.
# Exits 1 when the store's write rate is below MIN_RATIO (default 0.5) of
# the SET rate.
set -euo pipefail
cd "$(dirname "$0")/.."

n=${N:-100000}
min_ratio=${MIN_RATIO:-0.5}

for tool in redis-server redis-benchmark redis-cli go; do
	command -v "$tool" >/dev/null || { echo "redis_store.sh: $tool not found" >&2; exit 2; }
done

# A free port: the first one nothing answers on.
port=
for _ in $(seq 50); do
	p=$((20000 + RANDOM % 20000))
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[ -n "$port" ] || { echo "redis_store.sh: no free port" >&2; exit 2; }

dir=$(mktemp -d)
redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$dir" \
	--daemonize no --logfile "$dir/redis.log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
	redis-cli -p "$port" ping >/dev/null 2>&1 && break
	sleep 0.1
done

echo "# redis-benchmark -h 127.0.0.1 -p $port -t set,get -n $n -q"
rb=$(redis-benchmark -h 127.0.0.1 -p "$port" -t set,get -n "$n" -q | tr '\r' '\n' | grep 'requests per second')
echo "$rb"
set_rps=$(awk '/^SET:/ {print $2}' <<<"$rb")
get_rps=$(awk '/^GET:/ {print $2}' <<<"$rb")

echo "# HERMES_BENCH_REDIS_URL=redis://127.0.0.1:$port/0 go test -run '^\$' -bench 'BenchmarkRedisStore(Put|Get)\$' -benchtime ${n}x ./runner/receipts/redisstore/"
gb=$(HERMES_BENCH_REDIS_URL="redis://127.0.0.1:$port/0" go test -run '^$' \
	-bench 'BenchmarkRedisStore(Put|Get)$' -benchtime "${n}x" ./runner/receipts/redisstore/ 2>/dev/null)
grep '^Benchmark' <<<"$gb"
metric() { awk -v b="$1" '$1 ~ "^"b"(-[0-9]+)?$" { for (i = 2; i < NF; i++) if ($(i+1) == "receipts/s") print $i }' <<<"$gb"; }
put_rps=$(metric BenchmarkRedisStorePut)
get_store=$(metric BenchmarkRedisStoreGet)

echo
printf '%-26s %14s   %-26s %14s   %s\n' "redis-benchmark" "requests/s" "store" "receipts/s" "ratio"
printf '%-26s %14.0f   %-26s %14.0f   %.2f\n' "SET" "$set_rps" "Put" "$put_rps" "$(awk -v a="$put_rps" -v b="$set_rps" 'BEGIN { print a / b }')"
printf '%-26s %14.0f   %-26s %14.0f   %.2f\n' "GET" "$get_rps" "Get (full id)" "$get_store" "$(awk -v a="$get_store" -v b="$get_rps" 'BEGIN { print a / b }')"

if awk -v a="$put_rps" -v b="$set_rps" -v m="$min_ratio" 'BEGIN { exit !(a / b < m) }'; then
	echo "FAIL: store writes at less than $min_ratio x the SET rate" >&2
	exit 1
fi
echo "ok: store writes at >= $min_ratio x the SET rate"
