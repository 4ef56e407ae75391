#!/usr/bin/env bash
# (m) the load generator (issue 60), side by side in the same rounds (their order rotating) on one
# nginx: `haul load` against hey and wrk over HTTP/1.1, and against h2load over HTTPS with HTTP/2;
# one URL, bodies of 64 KiB and of 1 MiB, 100 and 1,000 downloads at once. Each tool's own
# requests/s (hey's and wrk's "Requests/sec", h2load's "req/s", haul's requestsPerSecond), beside
# its CPU and peak RSS. Then haul load's peak RSS with 10,000 slow downloads live at once, beside
# (c)'s per-transfer figure (haul-bench live) in the same run.
#
#   bash Benchmarks/load.sh      (ROUNDS=3, COUNT64K=20000, COUNT1M=4000, SECONDS_WRK=4, LIVE=10000;
#                                 results in Benchmarks/load.jsonl)
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/opt/swift/usr/bin"
bash ../scripts/install-deps.sh
# The peers: Debian's packages.
missing=()
for tool in hey:hey wrk:wrk h2load:nghttp2-client; do command -v "${tool%%:*}" > /dev/null || missing+=("${tool#*:}"); done
if ((${#missing[@]})); then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi
rounds="${ROUNDS:-3}"
live="${LIVE:-10000}"
source local-nginx.sh
build_products haul haul-bench
bin="$(swift build -c release --show-bin-path)"
haul="$bin/haul"
# The floor: a bare C program on libcurl's multi-socket API and libevent, each body kept in memory
# and freed (floor/events.c): what libcurl and the kernel cost a body with nothing else.
mkdir -p .build
cc -O2 floor/events.c -lcurl -levent -o .build/events

work="$(mktemp -d /dev/shm/haul-load.XXXXXX)"
trap 'nginx_stop "$work"; rm -rf "$work"' EXIT
tls_nginx_start "$work"
head -c 65536 /dev/urandom > "$work/www/64k.bin"
head -c 1048576 /dev/urandom > "$work/www/1m.bin"
head -c 8192 /dev/urandom > "$work/www/8k.bin"
results="$PWD/load.jsonl"
: > "$results"
# The build measured, on each row: report.py sets (m)'s profile beside these rows only when both
# come from the same build (profile.sh records its own).
build="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

rotated() {  # rotated ROUND ITEM…: the items, starting with the ROUND-th
    local round=$1; shift
    local items=("$@") i
    for i in $(seq 0 $((${#items[@]} - 1))); do echo "${items[$(((i + round) % ${#items[@]}))]}"; done
}
# timed BODY CONCURRENCY CLIENT RATE-PATTERN COMMAND…: runs a tool; records its own requests/s (the
# number in the first match of RATE-PATTERN in its output), wall, CPU and peak RSS.
timed() {
    local body=$1 concurrency=$2 client=$3 pattern=$4; shift 4
    /usr/bin/time -o "$work/time.txt" -f '%e %U %S %M' "$@" > "$work/out.txt" 2> "$work/err.txt" || {
        echo "(m) $client $body c=$concurrency failed:"; cat "$work/err.txt" "$work/out.txt" | tail -20; exit 1; }
    local rate
    rate="$(grep -oE "$pattern" "$work/out.txt" | head -1 | grep -oE '[0-9]+(\.[0-9]+)?' | head -1)"
    [ -n "$rate" ] || { echo "(m) $client: no rate in its output"; cat "$work/out.txt"; exit 1; }
    awk -v b="$body" -v c="$concurrency" -v n="$client" -v r="$rate" -v build="$build" '{ printf "{\"scenario\":\"load\",\"build\":\"%s\",\"client\":\"%s\",\"body\":\"%s\",\"concurrency\":%d,\"requestsPerSecond\":%s,\"wallSeconds\":%s,\"cpuSeconds\":%.2f,\"peakRSSKB\":%s}\n", build, n, b, c, r, $1, $2 + $3, $4 }' "$work/time.txt" >> "$results"
}
# A run that answered anything but 200 does not count.
all_ok() {
    case "$1" in
        haul|haul-h2) grep -q '"failed":0,' "$work/out.txt" ;;
        hey) ! grep -qE '^\s+\[[^2][0-9][0-9]\]|Error distribution' "$work/out.txt" ;;
        wrk) ! grep -q 'Non-2xx\|Socket errors' "$work/out.txt" ;;
        h2load) grep -qE 'status codes: [0-9]+ 2xx, 0 3xx, 0 4xx, 0 5xx' "$work/out.txt" && grep -q ' 0 failed, 0 errored' "$work/out.txt" ;;
    esac || { echo "(m) $1: not every answer was a 200"; cat "$work/out.txt"; exit 1; }
}

for body in 64k 1m; do
    if [ "$body" = 64k ]; then count="${COUNT64K:-20000}"; else count="${COUNT1M:-4000}"; fi
    for concurrency in 100 1000; do
        echo "== (m) $count downloads of $body, $concurrency at once"
        for round in $(seq 1 "$rounds"); do
            clients=(haul hey wrk haul-h2 h2load)
            # The floor fetches the 1,000 files of 64 KiB in turn (its URLs are BASE/f<i>.bin).
            [ "$body" = 64k ] && clients+=(floor floor-h2)
            for client in $(rotated "$round" "${clients[@]}"); do
                case "$client" in
                    haul) timed "$body" "$concurrency" haul '"requestsPerSecond":[0-9.]+' \
                              "$haul" load --json -n "$count" -c "$concurrency" "$base/$body.bin" ;;
                    haul-h2) timed "$body" "$concurrency" haul-h2 '"requestsPerSecond":[0-9.]+' \
                              "$haul" load --json --ca-file "$work/cert.pem" -n "$count" -c "$concurrency" "$tls_base/$body.bin" ;;
                    hey) timed "$body" "$concurrency" hey 'Requests/sec:[[:space:]]+[0-9.]+' \
                             hey -n "$count" -c "$concurrency" -disable-compression "$base/$body.bin" ;;
                    # wrk runs for a duration, two threads (its default; the machine's two cores).
                    wrk) timed "$body" "$concurrency" wrk 'Requests/sec:[[:space:]]+[0-9.]+' \
                             wrk -t 2 -c "$concurrency" -d "${SECONDS_WRK:-4}s" --timeout 30s "$base/$body.bin" ;;
                    # HTTP/2 in haul's shape: up to 8 streams a connection (maxStreamsPerConnection), more
                    # connections beyond.
                    h2load) timed "$body" "$concurrency" h2load '[0-9.]+ req/s' \
                                h2load -n "$count" -c $(((concurrency + 7) / 8)) -m 8 "$tls_base/$body.bin" ;;
                    # Its rate from its wall time (process start included: a few milliseconds).
                    # floor-h2: the same program over HTTPS with HTTP/2 in h2load's shape (FLOOR_HTTP2).
                    floor|floor-h2)
                           if [ "$client" = floor ]; then floor_env=(); url="$base"; else floor_env=(FLOOR_HTTP2="$work/cert.pem"); url="$tls_base"; fi
                           env "${floor_env[@]}" /usr/bin/time -o "$work/time.txt" -f '%e %U %S %M' .build/events "$url" "$count" "$concurrency" - \
                               > "$work/out.txt" 2>&1 || { echo "(m) $client c=$concurrency failed:"; tail -5 "$work/out.txt"; exit 1; }
                           awk -v c="$concurrency" -v n="$count" -v name="$client" -v build="$build" '{ printf "{\"scenario\":\"load\",\"build\":\"%s\",\"client\":\"%s\",\"body\":\"64k\",\"concurrency\":%d,\"requestsPerSecond\":%.1f,\"wallSeconds\":%s,\"cpuSeconds\":%.2f,\"peakRSSKB\":%s}\n", build, name, c, n / $1, $1, $2 + $3, $4 }' "$work/time.txt" >> "$results"
                           continue ;;
                esac
                all_ok "$client"
            done
        done
    done
done

echo "== (m) $live slow downloads live at once: haul load's peak RSS, beside (c)'s per transfer"
# 8 KiB at 2 KB/s: each download lasts about 4 s, every one of them live at once.
"$haul" --version > /dev/null
timed live 1 haul-baseline '"requestsPerSecond":[0-9.]+' "$haul" load --json -n 1 -c 1 "$base/limited/8k.bin"
timed live "$live" haul-live '"requestsPerSecond":[0-9.]+' "$haul" load --json -n "$live" -c "$live" "$base/limited/8k.bin"
all_ok haul
mkdir -p "$work/live"
"$bin/haul-bench" live haul "$base/limited" "$live" "$work/live" | sed 's/"scenario":"live"/"scenario":"live-c"/' >> "$results"
rm -rf "$work/live"
python3 report.py load.jsonl | sed -n '/^## (m)/,$p'
