#!/usr/bin/env bash
# The work per body that timing on a busy machine cannot tell apart, counted: system calls by name
# (`strace -f -c`), allocations (`malloc` calls), SQLite statements stepped (by kind) and libcurl
# header lookups (floor/counting.c, preloaded), for (a) files (`haul-bench many`, tmpfs), (k) bodies
# into memory (`haul-bench memory`) and (m) `haul load`, each against one local nginx, for one or
# more builds side by side. Per body: a run of SMALL bodies taken from a run of SMALL + COUNT, so
# that start-up and shutdown cancel out. Counts, not times: the same on any machine, whatever runs
# beside it (CPU on this VM varied ±30 % from one minute to the next). A change that removes a
# system call, an allocation or a statement per body shows here at once; whether it pays shows in
# compare.sh's alternating rounds.
#
#   bash Benchmarks/counts.sh [REVISION ...]   (default HEAD; COUNT=2000, SMALL=200; SCENARIOS="a k m")
#
# Each revision is built (release) in a worktree under Benchmarks/.build-compare/, as compare.sh does.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/opt/swift/usr/bin"
bash ../scripts/install-deps.sh
command -v strace > /dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends strace > /dev/null
count="${COUNT:-2000}"
small="${SMALL:-200}"
scenarios="${SCENARIOS:-a k m}"
[ $# -gt 0 ] || set -- HEAD
source ./local-nginx.sh
counting="$PWD/.build-compare/counting.so"
mkdir -p "$(dirname "$counting")"
cc -O2 -shared -fPIC floor/counting.c -o "$counting" -ldl
names=()
declare -A cli lib
for revision in "$@"; do
    build_revision "$revision"
    cli[$revision]=$built_cli
    lib[$revision]=$built_lib
    names+=("$revision")
done

work="$(mktemp -d /dev/shm/haul-counts.XXXXXX)"
trap 'nginx_stop "$work"; rm -rf "$work"' EXIT
local_nginx_start "$work"

counted() {  # counted REVISION SCENARIO N OUT: N bodies, the counts in OUT (name count per line)
    local revision=$1 scenario=$2 n=$3 out=$4 command
    rm -rf "$work/out"; mkdir -p "$work/out"
    case $scenario in
        a) command=("${lib[$revision]}" many haul "$base" "$n" 100 "$work/out") ;;
        k) command=("${lib[$revision]}" memory haul "$base" "$n" 100 "$work/out") ;;
        m) command=("${cli[$revision]}" load -n "$n" -c 100 --json "$base/f1.bin") ;;
    esac
    strace -f -c -o "$work/strace.txt" "${command[@]}" > /dev/null 2>&1 || { echo "$revision $scenario: the run failed"; exit 1; }
    rm -rf "$work/out"; mkdir -p "$work/out"
    COUNTING_OUT="$work/counting.txt" LD_PRELOAD="$counting" "${command[@]}" > /dev/null 2>&1 \
        || { echo "$revision $scenario: the counted run failed"; exit 1; }
    # strace's table: calls in the 4th column (5th when an error count sits before the name).
    awk '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" { print "syscall:" $NF, $4 }' "$work/strace.txt" > "$out"
    cat "$work/counting.txt" >> "$out"
}

for scenario in $scenarios; do
    for revision in "${names[@]}"; do
        counted "$revision" "$scenario" "$small" "$work/$scenario-small"
        counted "$revision" "$scenario" $((small + count)) "$work/$scenario-big"
        # Per body: (big - small) / count, by name.
        awk -v n="$count" -v r="$revision" 'FNR == NR { small[$1] = $2; next } { printf "%s %s %.2f\n", r, $1, ($2 - small[$1]) / n }' \
            "$work/$scenario-small" "$work/$scenario-big" > "$work/$scenario-$(echo "$revision" | tr '/' '_').per"
    done
    echo "== ($scenario) per body, $count bodies of 64 KiB, 100 in flight (a: files, tmpfs; k: into memory; m: haul load)"
    cat "$work/$scenario-"*.per | python3 -c '
import sys
revisions = sys.argv[1:]
table = {}
for line in sys.stdin:
    revision, name, value = line.split()
    table.setdefault(name, {})[revision] = float(value)
rows = [name for name in table if any(abs(v) >= 0.05 for v in table[name].values())]
rows.sort(key=lambda name: (not name.startswith("syscall"), -max(table[name].values())))
print("| " + " | ".join(["per body"] + revisions) + " |")
print("|" + "---|" * (len(revisions) + 1))
for name in rows:
    print("| " + " | ".join([name] + ["%.2f" % table[name].get(r, 0) for r in revisions]) + " |")
' "${names[@]}"
done
