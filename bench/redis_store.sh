#!/usr/bin/env bash
# Receipts written and read per second through the Redis receipt store,
# next to redis-benchmark's plain SET and GET on the same server.
#
# Starts a private redis-server (no persistence) on a free loopback port and
# runs ROUNDS interleaved rounds (default 3), each:
#   redis-benchmark -t set,get -n 100000 -q        (50 clients, no pipelining)
#   BenchmarkRedisStorePut/Get for as many operations, 50 concurrent callers
# so that load from elsewhere on the machine falls on both alike. Prints every
# round and the medians; exits 1 when the median ratio of store writes to
# SETs is below MIN_RATIO (default 0.5).
set -euo pipefail
cd "$(dirname "$0")/.."

n=${N:-100000}
rounds=${ROUNDS:-3}
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
go test -c -o "$dir/redisstore.test" ./runner/receipts/redisstore/

url="redis://127.0.0.1:$port/0"
echo "redis-server $(redis-server --version | awk '{print $3}'), $(go version | awk '{print $3}'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "per round:"
echo "  redis-benchmark -h 127.0.0.1 -p $port -t set,get -n $n -q"
echo "  HERMES_BENCH_REDIS_URL=$url go test -run '^\$' -bench 'BenchmarkRedisStore(Put|Get)\$' -benchtime ${n}x ./runner/receipts/redisstore/"
echo

metric() { awk -v b="$1" '$1 ~ "^"b"(-[0-9]+)?$" { for (i = 2; i < NF; i++) if ($(i+1) == "receipts/s") print $i }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-6s %12s %12s %6s   %12s %12s %6s\n' round "SET/s" "Put/s" ratio "GET/s" "Get/s" ratio
sets=() puts=() gets=() rgets=() wr=() rr=()
for r in $(seq "$rounds"); do
	rb=$(redis-benchmark -h 127.0.0.1 -p "$port" -t set,get -n "$n" -q | tr '\r' '\n' | grep 'requests per second')
	set_rps=$(awk '/^SET:/ {print $2}' <<<"$rb")
	get_rps=$(awk '/^GET:/ {print $2}' <<<"$rb")
	gb=$(HERMES_BENCH_REDIS_URL="$url" "$dir/redisstore.test" -test.run '^$' \
		-test.bench 'BenchmarkRedisStore(Put|Get)$' -test.benchtime "${n}x" 2>/dev/null)
	put_rps=$(metric BenchmarkRedisStorePut <<<"$gb")
	sget_rps=$(metric BenchmarkRedisStoreGet <<<"$gb")
	sets+=("$set_rps") puts+=("$put_rps") gets+=("$get_rps") rgets+=("$sget_rps")
	wr+=("$(ratio "$put_rps" "$set_rps")") rr+=("$(ratio "$sget_rps" "$get_rps")")
	printf '%-6s %12.0f %12.0f %6s   %12.0f %12.0f %6s\n' "$r" "$set_rps" "$put_rps" "${wr[-1]}" "$get_rps" "$sget_rps" "${rr[-1]}"
done
m() { printf '%s\n' "$@" | median; }
printf '%-6s %12.0f %12.0f %6s   %12.0f %12.0f %6s\n' median "$(m "${sets[@]}")" "$(m "${puts[@]}")" "$(m "${wr[@]}")" \
	"$(m "${gets[@]}")" "$(m "${rgets[@]}")" "$(m "${rr[@]}")"
echo "(ratio: store receipts/s over redis-benchmark requests/s, per round; the median row takes each column's median)"

if awk -v a="$(m "${wr[@]}")" -v m="$min_ratio" 'BEGIN { exit !(a < m) }'; then
	echo "FAIL: store writes at less than ${min_ratio}x the SET rate" >&2
	exit 1
fi
echo "ok: store writes at >= ${min_ratio}x the SET rate"
