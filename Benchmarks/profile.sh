#!/usr/bin/env bash
# Where each body's CPU goes (issue 61, item 1): `perf record -g` over the whole process, every
# thread, for (a) files over HTTP/1.1, (e) files over HTTPS with HTTP/2, (k) bodies into memory and
# (m) `haul load`, each sample attributed to what Haul was doing and to what paid for it
# (profile.py). Results in Benchmarks/profile.jsonl; report.py draws the tables.
#
#   bash Benchmarks/profile.sh      (COUNT=10000 bodies of 64 KiB, 100 in flight; FREQUENCY=1999 Hz;
#                                    SCENARIOS="a e k m": fewer for a build older than `haul load`)
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/opt/swift/usr/bin"
bash ../scripts/install-deps.sh
command -v perf > /dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends linux-perf > /dev/null
count="${COUNT:-10000}"
frequency="${FREQUENCY:-1999}"
scenarios=" ${SCENARIOS:-a e k m} "
source local-nginx.sh
build_products haul haul-bench
bin="$(swift build -c release --show-bin-path)"

work="$(mktemp -d /dev/shm/haul-profile.XXXXXX)"
trap 'nginx_stop "$work"; rm -rf "$work"' EXIT
tls_nginx_start "$work"
# PROFILE_RESULTS=profile-before.jsonl keeps a profile of an earlier build beside the current one
# (run from that build's checkout); report.py then sets the two side by side.
results="$PWD/${PROFILE_RESULTS:-profile.jsonl}"
: > "$results"
PROFILE_BUILD="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
export PROFILE_BUILD

profiled() {  # profiled SCENARIO COMMAND…: the command's CPU alone, then under perf, its samples attributed
    local scenario=$1 cpu; shift
    rm -rf "$work/out" "$work/state"
    /usr/bin/time -o "$work/time.txt" -f '%U %S' "$@" > /dev/null 2>&1 || { echo "$scenario failed"; exit 1; }
    cpu="$(awk '{ print $1 + $2 }' "$work/time.txt")"
    rm -rf "$work/out" "$work/state"
    # DWARF unwinding: libcurl and the C libraries have no frame pointers, and with -g half of the
    # samples stopped at them, short of the Haul frame that called them.
    perf record -q -F "$frequency" --call-graph dwarf,16384 -o "$work/perf.data" -- "$@" > "$work/run.txt" 2> "$work/perf.txt" || {
        echo "$scenario failed:"; cat "$work/perf.txt" "$work/run.txt" | tail -20; exit 1; }
    perf script -i "$work/perf.data" -F tid,ip,sym,dso 2> /dev/null | python3 profile.py "$scenario" "$count" "$frequency" "$cpu" >> "$results"
    echo "$scenario: $(tail -1 "$results" | grep -oE '"microsecondsPerBody": [0-9.]+' | head -1) (all threads)"
}

echo "== where a body's CPU goes: $count bodies of 64 KiB, 100 in flight, sampled at $frequency Hz"
[[ $scenarios == *" a "* ]] && profiled a "$bin/haul-bench" many haul "$base" "$count" 100 "$work/out"
[[ $scenarios == *" e "* ]] && HAUL_CA_FILE="$work/cert.pem" profiled e "$bin/haul-bench" many-h2 haul "$tls_base" "$count" 100 "$work/out"
[[ $scenarios == *" k "* ]] && profiled k "$bin/haul-bench" memory haul "$base" "$count" 100 "$work/state"
[[ $scenarios == *" m "* ]] && profiled m "$bin/haul" load -n "$count" -c 100 --json "$base/f1.bin"
python3 report.py "$results" | sed -n '/^## Where a body/,$p'
