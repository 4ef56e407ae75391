#!/usr/bin/env bash
# Two builds of Haul side by side, in the same rounds against one local nginx: the library's (a)
# (10,000 files of 64 KiB, 100 in flight, to tmpfs), `haul -i`'s (h) (the same list, to tmpfs and to
# the machine's disk), (e) (the library's (a) over HTTPS with HTTP/2), (k) (10,000 bodies of 64 KiB
# into memory, `data(from:)`) and (m) (`haul load`, 20,000 requests of one 64 KiB URL, 100 at
# once), with curl --parallel (hey for (m)) as the same-run reference. For a change that must not be
# slower: the rounds alternate which build goes first. SCENARIOS picks some (by default all: many
# cli-tmpfs cli-disk many-h2 memory load).
#
#   bash Benchmarks/compare.sh BEFORE AFTER     (git revisions; ROUNDS=5, COUNT=10000 by default)
#
# Each revision is built (release) in a worktree under Benchmarks/.build-compare/. Every run is
# checked byte for byte; the medians are printed, and every run goes to Benchmarks/compare.jsonl.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/opt/swift/usr/bin"
[ $# -eq 2 ] || { echo "usage: bash Benchmarks/compare.sh BEFORE AFTER (git revisions)"; exit 64; }
bash ../scripts/install-deps.sh
rounds="${ROUNDS:-5}"
count="${COUNT:-10000}"
source ./local-nginx.sh
declare -A cli lib
for side in before after; do
    revision=$1; shift
    build_revision "$revision"
    cli[$side]=$built_cli
    lib[$side]=$built_lib
    echo "$side: $revision ($built_commit)"
done

work="$(mktemp -d /dev/shm/haul-compare.XXXXXX)"
disk="${DISK_DIR:-/var/tmp/haul-compare-disk}"
trap 'nginx_stop "$work"; rm -rf "$work" "$disk"' EXIT
mkdir -p "$disk"
tls_nginx_start "$work"
head -c 65536 /dev/urandom > "$work/www/64k.bin"
scenarios="${SCENARIOS:-many cli-tmpfs cli-disk many-h2 memory load}"
load_count="${LOAD_COUNT:-20000}"
command -v hey > /dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends hey > /dev/null
seq 0 $((count - 1)) | awk -v base="$base" '{ printf "%s/f%d.bin\n  out=%d.bin\n", base, $1 % 1000, $1 }' > "$work/haul.list"
results="$PWD/compare.jsonl"
: > "$results"

timed() {  # timed SCENARIO CLIENT COMMAND…: wall, CPU and peak RSS of one process
    local scenario=$1 client=$2; shift 2
    /usr/bin/time -o "$work/time.txt" -f '%e %U %S %M' "$@" > /dev/null 2>&1
    awk -v s="$scenario" -v c="$client" '{ printf "{\"scenario\":\"%s\",\"client\":\"%s\",\"wallSeconds\":%s,\"cpuSeconds\":%.2f,\"peakRSSKB\":%s}\n", s, c, $1, $2 + $3, $4 }' "$work/time.txt" >> "$results"
}
checked() {  # checked OUT WHAT: every file byte-identical to its source
    local i
    for i in $(seq 0 $((count - 1))); do
        cmp -s "$1/$i.bin" "$work/www/f$((i % 1000)).bin" || { echo "$2: file $i is wrong"; exit 1; }
    done
}
run() {  # run SCENARIO CLIENT: one run, checked
    case "$1" in memory|load) run_body "$1" "$2"; return ;; esac
    local out="$work/out"
    [ "$1" = cli-disk ] && out="$disk/$2-$round"
    rm -rf "$out"; mkdir -p "$out"
    if [ "$1" = cli-disk ]; then settle_disk "$out"; else settle_disk; fi
    case "$1:$2" in
        many:before|many:after) "${lib[$2]}" many haul "$base" "$count" 100 "$out" \
                                    | sed "s/\"client\":\"haul\"/\"client\":\"$2\"/" >> "$results" ;;
        many-h2:before|many-h2:after) HAUL_CA_FILE="$work/cert.pem" "${lib[$2]}" many haul "$tls_base" "$count" 100 "$out" \
                                    | sed "s/\"client\":\"haul\"/\"client\":\"$2\"/; s/\"scenario\":\"many\"/\"scenario\":\"many-h2\"/" >> "$results" ;;
        many-h2:curl) seq 0 $((count - 1)) | awk -v base="$tls_base" -v out="$out" \
                    '{ printf "url = \"%s/f%d.bin\"\noutput = \"%s/%d.bin\"\n", base, $1 % 1000, out, $1 }' > "$work/curl.config"
                timed "$1" curl curl -s --parallel --parallel-max 100 --cacert "$work/cert.pem" --create-dirs -K "$work/curl.config" ;;
        cli-*:before|cli-*:after) timed "$1" "$2" "${cli[$2]}" --quiet -j 100 -o "$out" -i "$work/haul.list" ;;
        *:curl) seq 0 $((count - 1)) | awk -v base="$base" -v out="$out" \
                    '{ printf "url = \"%s/f%d.bin\"\noutput = \"%s/%d.bin\"\n", base, $1 % 1000, out, $1 }' > "$work/curl.config"
                timed "$1" curl curl -s --parallel --parallel-max 100 --create-dirs -K "$work/curl.config" ;;
    esac
    checked "$out" "$1 $2"
    # On the disk each run keeps its folder until the end (freed inodes slow the next creates).
    [ "$1" = cli-disk ] || rm -rf "$out"
}
run_body() {  # run_body SCENARIO CLIENT: (k) or (m), checked by the bytes or the answers counted
    rm -rf "$work/state"
    case "$1:$2" in
        memory:before|memory:after)
            "${lib[$2]}" memory haul "$base" "$count" 100 "$work/state" \
                | sed "s/\"client\":\"haul\"/\"client\":\"$2\"/" >> "$results"
            tail -1 "$results" | grep -q "\"bytes\":$((count * 65536))[,}]" || { echo "memory $2: bytes missing"; exit 1; } ;;
        memory:curl)
            seq 0 $((count - 1)) | awk -v base="$base" '{ printf "url = \"%s/f%d.bin\"\noutput = \"/dev/null\"\n", base, $1 % 1000 }' > "$work/curl.config"
            timed memory curl curl -s --parallel --parallel-max 100 -K "$work/curl.config" ;;
        load:before|load:after)
            /usr/bin/time -o "$work/time.txt" -f '%e %U %S %M' "${cli[$2]}" load --json -n "$load_count" -c 100 "$base/64k.bin" > "$work/load.json" 2>&1
            grep -q '"failed":0,' "$work/load.json" || { echo "load $2: not every answer a 200"; cat "$work/load.json"; exit 1; }
            awk -v c="$2" '{ printf "{\"scenario\":\"load\",\"client\":\"%s\",\"wallSeconds\":%s,\"cpuSeconds\":%.2f,\"peakRSSKB\":%s}\n", c, $1, $2 + $3, $4 }' "$work/time.txt" >> "$results" ;;
        load:curl)  # the same-run reference here is hey
            timed load hey hey -n "$load_count" -c 100 -disable-compression "$base/64k.bin" ;;
    esac
}
for round in $(seq 1 "$rounds"); do
    order="before after curl"
    [ $((round % 2)) -eq 0 ] && order="after before curl"
    for scenario in $scenarios; do
        for client in $order; do run "$scenario" "$client"; done
    done
    echo "round $round of $rounds done"
done
python3 - "$results" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
print("| scenario | client | runs | wall s (median) | CPU s (median) | peak RSS MB (median) |")
print("|---|---|---|---|---|---|")
scenarios = ["many", "cli-tmpfs", "cli-disk", "many-h2", "memory", "load"]
for scenario in scenarios:
    for client in ["before", "after", "curl", "hey"]:
        mine = [r for r in runs if r["scenario"] == scenario and r["client"] == client]
        if not mine:
            continue
        median = lambda key: statistics.median(r[key] for r in mine if key in r)
        rss = median("peakRSSKB") / 1024 if any("peakRSSKB" in r for r in mine) else float("nan")
        print(f"| {scenario} | {client} | {len(mine)} | {median('wallSeconds'):.3f} | {median('cpuSeconds'):.2f} | {rss:.1f} |")
# The machine's load drifts between rounds more than a change moves a median: the ratio of the two
# builds within each round (they run back to back) says more.
print()
# The last column: each build's least CPU over the rounds, divided. Interference on this VM (the host's
# load) only ever adds CPU, so each build's best round is its least disturbed one; with few rounds it
# is as noisy as the rest (4 rounds: (k) 0.818 where the median of the ratios said 0.966).
print("| scenario | after ÷ before, wall, each round | median | CPU, median | CPU, least ÷ least |")
print("|---|---|---|---|---|")
for scenario in scenarios:
    pairs = list(zip(
        [r for r in runs if r["scenario"] == scenario and r["client"] == "after"],
        [r for r in runs if r["scenario"] == scenario and r["client"] == "before"],
    ))
    if not pairs:
        continue
    wall = [a["wallSeconds"] / b["wallSeconds"] for a, b in pairs]
    cpu = [a["cpuSeconds"] / b["cpuSeconds"] for a, b in pairs]
    shown = " ".join(f"{w:.2f}" for w in wall)
    least = min(a["cpuSeconds"] for a, _ in pairs) / min(b["cpuSeconds"] for _, b in pairs)
    print(f"| {scenario} | {shown} | {statistics.median(wall):.3f} | {statistics.median(cpu):.3f} | {least:.3f} |")
PY
