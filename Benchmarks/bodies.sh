#!/usr/bin/env bash
# Bodies that are not files (issue 42), side by side in the same rounds (their order rotating):
#   (k) COUNT bodies of 64 KiB into memory, 100 in flight: Haul's data(from:maximumSize:),
#       stream(from:) collected, and discard(from:), AsyncHTTPClient collecting response.body, URLSession's data(from:), curl
#       --parallel to /dev/null, and the two bare programs keeping each body in memory (floor/*.c "-").
#   (l) one 1 GiB body streamed to a consumer that hashes it (SHA-256): Haul's stream(from:) with
#       OpenSSL's SHA-256, beside `curl | sha256sum` and `curl | openssl dgst -sha256` (the same hash
#       code as Haul's consumer); every digest checked. Then Haul's consumer slowed to 50 MB/s: its
#       peak RSS.
#
#   bash Benchmarks/bodies.sh            (ROUNDS=3, COUNT=10000; results in Benchmarks/bodies.jsonl)
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/opt/swift/usr/bin"
bash ../scripts/install-deps.sh
rounds="${ROUNDS:-3}"
count="${COUNT:-10000}"
swift build -c release --product haul-bench > /dev/null
swift build -c release --product peer-bench > /dev/null
bin="$(swift build -c release --show-bin-path)"
mkdir -p .build
cc -O2 floor/many.c -lcurl -o .build/many
cc -O2 floor/events.c -lcurl -levent -o .build/events
work="$(mktemp -d /dev/shm/haul-bodies.XXXXXX)"
source local-nginx.sh
trap 'nginx_stop "$work"; rm -rf "$work"' EXIT
local_nginx_start "$work"
head -c $((1024 * 1024 * 1024)) /dev/urandom > "$work/www/big.bin"
source_digest="$(sha256sum "$work/www/big.bin" | cut -c1-64)"
results="$PWD/bodies.jsonl"
: > "$results"

timed() {  # timed SCENARIO CLIENT COMMAND…: runs a process and records wall, CPU and peak RSS
    local scenario=$1 client=$2; shift 2
    /usr/bin/time -o "$work/time.txt" -f '%e %U %S %M' "$@" > "$work/out.txt" 2>&1
    awk -v s="$scenario" -v c="$client" '{ printf "{\"scenario\":\"%s\",\"client\":\"%s\",\"wallSeconds\":%s,\"cpuSeconds\":%.2f,\"peakRSSKB\":%s}\n", s, c, $1, $2 + $3, $4 }' "$work/time.txt" >> "$results"
}
rotated() {  # rotated ROUND ITEM…: the items, starting with the ROUND-th
    local round=$1; shift
    local items=("$@") i
    for i in $(seq 0 $((${#items[@]} - 1))); do echo "${items[$(((i + round) % ${#items[@]}))]}"; done
}
checked_bytes() {  # the last line's "bytes" must be COUNT bodies of 64 KiB
    tail -1 "$results" | grep -q "\"bytes\":$((count * 65536))[,}]" || { echo "(k) $1: bytes missing"; tail -1 "$results"; exit 1; }
}

echo "== (k) $count bodies of 64 KiB into memory, 100 in flight"
seq 0 $((count - 1)) | awk -v base="$base" '{ printf "url = \"%s/f%d.bin\"\noutput = \"/dev/null\"\n", base, $1 % 1000 }' > "$work/curl.config"
for round in $(seq 1 "$rounds"); do
    for client in $(rotated "$round" haul haul-stream haul-discard ahc urlsession curl libcurl-multi libcurl-events); do
        rm -rf "$work/state"
        case "$client" in
            haul) "$bin/haul-bench" memory haul "$base" "$count" 100 "$work/state" >> "$results"; checked_bytes haul ;;
            haul-stream) "$bin/haul-bench" streams haul "$base" "$count" 100 "$work/state" >> "$results"
                         checked_bytes haul-stream ;;
            haul-discard) "$bin/haul-bench" discard haul "$base" "$count" 100 "$work/state" >> "$results"
                          checked_bytes haul-discard ;;
            ahc|urlsession) "$bin/peer-bench" memory "$client" "$base" "$count" 100 >> "$results"; checked_bytes "$client" ;;
            curl) timed memory curl curl -s --parallel --parallel-max 100 -K "$work/curl.config" ;;
            libcurl-multi) timed memory libcurl-multi .build/many "$base" "$count" 100 - ;;
            libcurl-events) timed memory libcurl-events .build/events "$base" "$count" 100 - ;;
        esac
    done
done

echo "== (l) one 1 GiB body streamed to a consumer that hashes it"
for round in $(seq 1 "$rounds"); do
    for client in $(rotated "$round" haul curl-sha256sum curl-openssl); do
        rm -rf "$work/state"
        case "$client" in
            haul) "$bin/haul-bench" stream haul "$base/big.bin" 0 "$work/state" >> "$results"
                  digest="$(tail -1 "$results" | sed 's/.*"sha256":"\([0-9a-f]*\)".*/\1/')" ;;
            curl-sha256sum) timed stream curl-sha256sum sh -c "curl -s '$base/big.bin' | sha256sum"
                            digest="$(cut -c1-64 "$work/out.txt")" ;;
            curl-openssl) timed stream curl-openssl sh -c "curl -s '$base/big.bin' | openssl dgst -sha256 -r"
                          digest="$(cut -c1-64 "$work/out.txt")" ;;
        esac
        [ "$digest" = "$source_digest" ] || { echo "(l) $client: wrong digest $digest"; exit 1; }
    done
done
echo "== (l) the same, the consumer slowed to 50 MB/s"
rm -rf "$work/state"
"$bin/haul-bench" stream haul "$base/big.bin" 50 "$work/state" >> "$results"
grep -q "\"sha256\":\"$source_digest\"" <(tail -1 "$results") || { echo "(l) paced: wrong digest"; exit 1; }
python3 report.py "$results" | sed -n '/^## (k)/,$p'
