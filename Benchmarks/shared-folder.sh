#!/usr/bin/env bash
# What a second process costs on one folder (issue 41): `haul -i` over 10,000 files of 64 KiB to
# tmpfs, in the same rounds (their order rotating), every file checked byte for byte:
#   one          one process, -j 100, the whole list
#   two-shared   two processes at once, -j 50 each, half the list each, into one folder (one journal)
#   two-own      the same with a state directory each (--state): no journal shared
#   two-whole    two processes at once, -j 50 each, both with the whole list (each follows the rows
#                the other queued first; every file is fetched once)
#
#   bash Benchmarks/shared-folder.sh            (ROUNDS=7, COUNT=10000 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/opt/swift/usr/bin"
bash scripts/install-deps.sh
rounds="${ROUNDS:-7}"
count="${COUNT:-10000}"
swift build -c release --product haul > /dev/null
haul="$(swift build -c release --show-bin-path)/haul"
work="$(mktemp -d /dev/shm/haul-shared.XXXXXX)"
source Benchmarks/local-nginx.sh
trap 'nginx_stop "$work"; rm -rf "$work"' EXIT
local_nginx_start "$work"
list() {  # list FIRST LAST: entries FIRST..LAST in aria2's form, each with its out=
    seq "$1" "$2" | awk -v base="$base" '{ printf "%s/f%d.bin\n  out=%d.bin\n", base, $1 % 1000, $1 }'
}
list 0 $((count - 1)) > "$work/whole.list"
list 0 $((count / 2 - 1)) > "$work/half1.list"
list $((count / 2)) $((count - 1)) > "$work/half2.list"
results="$PWD/Benchmarks/shared-folder.jsonl"
: > "$results"
both() {  # both ARGS1 -- ARGS2: two haul processes at once; fails unless both exit 0
    local first=() second=() into=first
    for argument in "$@"; do
        if [ "$argument" = -- ]; then into=second; continue; fi
        if [ $into = first ]; then first+=("$argument"); else second+=("$argument"); fi
    done
    "$haul" --quiet "${first[@]}" & local pid=$!
    "$haul" --quiet "${second[@]}" || { wait $pid; return 1; }
    wait $pid
}
run() {  # run CASE: one timed run, checked
    local out="$work/out" start end
    rm -rf "$out"; mkdir -p "$out"; sync
    start=$(date +%s.%N)
    case "$1" in
        one) "$haul" --quiet -j 100 -i "$work/whole.list" -o "$out" ;;
        two-shared) both -j 50 -i "$work/half1.list" -o "$out" -- -j 50 -i "$work/half2.list" -o "$out" ;;
        two-own) both -j 50 --state "$out/.haul-a" -i "$work/half1.list" -o "$out" \
                     -- -j 50 --state "$out/.haul-b" -i "$work/half2.list" -o "$out" ;;
        two-whole) both -j 50 -i "$work/whole.list" -o "$out" -- -j 50 -i "$work/whole.list" -o "$out" ;;
    esac
    end=$(date +%s.%N)
    local i
    for i in $(seq 0 $((count - 1))); do
        cmp -s "$out/$i.bin" "$work/www/f$((i % 1000)).bin" || { echo "$1: file $i is wrong"; exit 1; }
    done
    printf '{"round":%d,"case":"%s","wallSeconds":%s}\n' "$round" "$1" "$(echo "$end - $start" | bc | sed 's/^\./0./')" \
        >> "$results"
}
cases="one two-shared two-own two-whole"
for round in $(seq 1 "$rounds"); do
    for case in $cases; do run "$case"; done
    cases="$(echo $cases | awk '{ for (i = 2; i <= NF; i++) printf "%s ", $i; print $1 }')"
    echo "round $round of $rounds done"
done
python3 - "$results" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
by = {}
for run in runs:
    by.setdefault(run["case"], []).append(run["wallSeconds"])
one = statistics.median(by["one"])
print("| case | runs | wall s (median) | ÷ one |")
print("|---|---|---|---|")
for case, walls in by.items():
    print(f"| {case} | {len(walls)} | {statistics.median(walls):.3f} | {statistics.median(walls) / one:.3f} |")
PY
