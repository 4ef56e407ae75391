#!/usr/bin/env bash
# Haul side by side with AsyncHTTPClient, URLSession and curl, in one run against one local nginx.
# Writes every measurement to Benchmarks/results.jsonl and the tables to Benchmarks/RESULTS.md.
#
#   bash Benchmarks/run.sh            (from a clone, as root on Debian 12; REPEAT=3 by default)
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/opt/swift/usr/bin"
bash ../scripts/install-deps.sh
swift build -c release
bin="$(swift build -c release --show-bin-path)"
bench() {  # bench SCENARIO CLIENT ARGS…: Haul runs alone in haul-bench, the peers in peer-bench
    if [ "$2" = haul ]; then "$bin/haul-bench" "$@"; else "$bin/peer-bench" "$@"; fi
}
source ./local-nginx.sh
cc -O2 floor/multi.c -lcurl -o .build/multi
cc -O2 floor/many.c -lcurl -o .build/many
cc -O2 floor/events.c -lcurl -levent -o .build/events
cc -O2 -shared -fPIC floor/nosync.c -ldl -o .build/nosync.so
repeat="${REPEAT:-3}"
count="${COUNT:-10000}"
live="${LIVE:-10000}"
queued="${QUEUED:-1000000}"

work="$(mktemp -d /dev/shm/haul-bench.XXXXXX)"   # files and downloads on tmpfs: the network path is measured, not a disk
trap 'nginx -p "$work" -c "$work/nginx.conf" -e "$work/logs/error.log" -s stop 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/www" "$work/logs" "$work/tmp"
for i in $(seq 0 999); do head -c 65536 /dev/urandom > "$work/www/f$i.bin"; done
head -c $((1024 * 1024 * 1024)) /dev/urandom > "$work/www/big.bin"
# Ports below the kernel's range for outgoing connections (32768 and up on Debian): a port picked
# in it can be held by a client socket of an earlier run, and nginx then fails to bind. One that a
# server listens on is passed over too.
first_local_port=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
port=$((10000 + RANDOM % (first_local_port - 10002)))
while ss -ltnH "( sport = :$port or sport = :$((port + 1)) )" 2>/dev/null | grep -q .; do
    port=$((10000 + RANDOM % (first_local_port - 10002)))
done
tls_port=$((port + 1))
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2> /dev/null
cat > "$work/nginx.conf" <<CONF
daemon on;
worker_processes 1;
worker_rlimit_nofile 65536;
user root;
pid $work/nginx.pid;
error_log $work/logs/error.log;
events { worker_connections 60000; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $work/tmp; proxy_temp_path $work/tmp; fastcgi_temp_path $work/tmp;
    uwsgi_temp_path $work/tmp; scgi_temp_path $work/tmp;
    server {
        listen 127.0.0.1:$port backlog=65535;
        listen 127.0.0.1:$tls_port ssl http2 backlog=65535;
        ssl_certificate $work/cert.pem;
        ssl_certificate_key $work/key.pem;
        root $work/www;
        # 10,000 slow responses would hold 10,000 open files in nginx besides its sockets, past the
        # hard open-files limit of 20,000 here (HTTP 500): the 1,000 files are opened once and shared.
        location /limited/ { alias $work/www/; limit_rate 2k; open_file_cache max=2000; }
        # (f): each connection at most PERCONN, as CDNs limit a TCP stream.
        location /perconn/ { alias $work/www/; limit_rate ${PERCONN:-32m}; }
    }
}
CONF
nginx -p "$work" -c "$work/nginx.conf" -e "$work/logs/error.log"
base="http://127.0.0.1:$port"
tls_base="https://127.0.0.1:$tls_port"
results="$PWD/results.jsonl"
: > "$results"

timed() {  # timed SCENARIO CLIENT COMMAND…: runs a process and records wall, CPU and peak RSS
    local scenario=$1 client=$2; shift 2
    /usr/bin/time -o "$work/time.txt" -f '%e %U %S %M' "$@" > /dev/null 2>&1
    awk -v s="$scenario" -v c="$client" '{ printf "{\"scenario\":\"%s\",\"client\":\"%s\",\"wallSeconds\":%s,\"cpuSeconds\":%.2f,\"peakRSSKB\":%s}\n", s, c, $1, $2 + $3, $4 }' "$work/time.txt" >> "$results"
}

check() {  # every file of (a) byte-identical to its source
    local i
    for i in $(seq 0 $((count - 1))); do
        cmp -s "$work/out/$i.bin" "$work/www/f$((i % 1000)).bin" || { echo "$1: file $i is wrong"; exit 1; }
    done
}

# Whoever first writes a gigabyte to this tmpfs also pays for the memory behind it (on a VM, the
# host backing the pages): write and drop one before each scenario that writes a lot, and start each
# round with the next client, so that no client is always first.
warm() { head -c $((1024 * 1024 * 1024)) /dev/zero > "$work/warm.bin"; rm -f "$work/warm.bin"; }
rotated() {  # rotated ROUND ITEM…: the items, starting with the ROUND-th
    local round=$1; shift
    local items=("$@") i
    for i in $(seq 0 $((${#items[@]} - 1))); do echo "${items[$(((i + round) % ${#items[@]}))]}"; done
}

run_many() {  # run_many CLIENT: one round of (a) for CLIENT, checked
    rm -rf "$work/out"; mkdir -p "$work/out"
    if [ "$1" = curl ]; then
        timed many curl curl -s --parallel --parallel-max 100 --create-dirs -K "$work/curl.config"
    elif [ "$1" = libcurl-multi ]; then
        timed many libcurl-multi .build/many "$base" "$count" 100 "$work/out"
    elif [ "$1" = libcurl-events ]; then
        timed many libcurl-events .build/events "$base" "$count" 100 "$work/out"
    else
        bench many "$1" "$base" "$count" 100 "$work/out" >> "$results"
    fi
    check "$1"
}

echo "== (a) $count files of 64 KiB, 100 in flight"
seq 0 $((count - 1)) | awk -v base="$base" -v out="$work/out" '{ printf "url = \"%s/f%d.bin\"\noutput = \"%s/%d.bin\"\n", base, $1 % 1000, out, $1 }' > "$work/curl.config"
warm
for round in $(seq 1 "$repeat"); do
    for client in $(rotated "$round" haul ahc urlsession curl libcurl-multi libcurl-events); do run_many "$client"; done
done

# (h): the command users run, `haul -i LIST -o DIR`, beside `curl --parallel -K` and the bare program,
# writing to tmpfs and to the machine's disk (the folder DISK_DIR, by default under /var/tmp), same rounds.
disk_dir="${DISK_DIR:-/var/tmp/haul-bench-disk}"
haul_cli="$(cd .. && swift build -c release --product haul --show-bin-path)/haul"
(cd .. && swift build -c release --product haul > /dev/null)
seq 0 $((count - 1)) | awk -v base="$base" '{ printf "%s/f%d.bin\n  out=%d.bin\n", base, $1 % 1000, $1 }' > "$work/haul.list"
# On the disk each run writes a folder of its own, and the folders go only after the last round:
# ext4 without a journal skips inodes freed in the last minutes when it allocates new ones
# (recently_deleted, which it checks only when it has no journal), and 10,000 files deleted between
# rounds made the next client's creates cost more than its writes (curl took 7 s instead of 1.5 s,
# most of it in the allocator's scan). What the disk is, and whether it has a journal, is recorded.
mkdir -p "$disk_dir"
disk_source="$(findmnt -no SOURCE -T "$disk_dir")"
disk_fs="$(findmnt -no FSTYPE -T "$disk_dir")"
disk_journal=false
ls /proc/fs/jbd2 2>/dev/null | grep -q "^$(basename "$(readlink -f "$disk_source")")-" && disk_journal=true
printf '{"scenario":"disk","client":"machine","fileSystem":"%s","journal":%s}\n' "$disk_fs" "$disk_journal" >> "$results"
# Before each run on the disk: settle_disk (local-nginx.sh) writes the last run's files back and
# drops their pages.
run_cli() {  # run_cli CLIENT WHERE (tmpfs or disk): one round of (h), checked
    local out="$work/out" scenario="cli-$2"
    [ "$2" = disk ] && out="$disk_dir/$1-$round"
    rm -rf "$out"; mkdir -p "$out"
    if [ "$2" = disk ]; then settle_disk "$out"; else sync; fi
    case "$1" in
        haul) timed "$scenario" haul "$haul_cli" --quiet -j 100 -o "$out" -i "$work/haul.list" ;;
        haul-nosync) timed "$scenario" haul-nosync env LD_PRELOAD="$PWD/.build/nosync.so" \
                         "$haul_cli" --quiet -j 100 -o "$out" -i "$work/haul.list" ;;
        curl) sed "s|$work/out|$out|" "$work/curl.config" > "$work/curl-cli.config"
              timed "$scenario" curl curl -s --parallel --parallel-max 100 --create-dirs -K "$work/curl-cli.config" ;;
        # curl, then `sync`: its files on the disk when it is done, as haul's are when it exits.
        curl-sync) sed "s|$work/out|$out|" "$work/curl.config" > "$work/curl-cli.config"
                   timed "$scenario" curl-sync sh -c \
                       "curl -s --parallel --parallel-max 100 --create-dirs -K '$work/curl-cli.config' && sync" ;;
        libcurl-multi) timed "$scenario" libcurl-multi .build/many "$base" "$count" 100 "$out" ;;
        libcurl-events) timed "$scenario" libcurl-events .build/events "$base" "$count" 100 "$out" ;;
    esac
    local i
    for i in $(seq 0 $((count - 1))); do
        cmp -s "$out/$i.bin" "$work/www/f$((i % 1000)).bin" || { echo "(h) $1 on $2: file $i is wrong"; exit 1; }
    done
    [ "$2" = disk ] || rm -rf "$out"
}
echo "== (h) haul -i over $count files of 64 KiB, 100 in flight, to tmpfs and to the disk ($disk_dir)"
rm -rf "$disk_dir"
for round in $(seq 1 "$repeat"); do
    for where in tmpfs disk; do
        clients="haul curl libcurl-multi libcurl-events"
        [ "$where" = disk ] && clients="haul haul-nosync curl curl-sync libcurl-multi libcurl-events"
        for client in $(rotated "$round" $clients); do run_cli "$client" "$where"; done
    done
done
# (h)'s folders stay until (a) on the disk is done too: deleted now, their inodes would slow its creates.

# (a) on the disk: the library (durable: one sync per batch, then each file named) beside curl and both
# floors, and the library with its syncs made no-ops; a folder of its own per run, as for (h).
run_many_disk() {  # run_many_disk CLIENT: one round of (a) written to the disk, checked
    local out="$disk_dir/a-$1-$round" i
    rm -rf "$out"; mkdir -p "$out"; settle_disk "$out"
    case "$1" in
        haul) bench many-disk haul "$base" "$count" 100 "$out" >> "$results" ;;
        haul-nosync) LD_PRELOAD="$PWD/.build/nosync.so" "$bin/haul-bench" many-disk haul "$base" "$count" 100 "$out" \
                         | sed 's/"client":"haul"/"client":"haul-nosync"/' >> "$results" ;;
        curl) sed "s|$work/out|$out|" "$work/curl.config" > "$work/curl-disk.config"
              timed many-disk curl curl -s --parallel --parallel-max 100 --create-dirs -K "$work/curl-disk.config" ;;
        libcurl-multi) timed many-disk libcurl-multi .build/many "$base" "$count" 100 "$out" ;;
        libcurl-events) timed many-disk libcurl-events .build/events "$base" "$count" 100 "$out" ;;
    esac
    for i in $(seq 0 $((count - 1))); do
        cmp -s "$out/$i.bin" "$work/www/f$((i % 1000)).bin" || { echo "(a) on the disk, $1: file $i is wrong"; exit 1; }
    done
}
echo "== (a) on the disk ($disk_dir)"
for round in $(seq 1 "$repeat"); do
    for client in $(rotated "$round" haul haul-nosync curl libcurl-multi libcurl-events); do run_many_disk "$client"; done
done
rm -rf "$disk_dir"

# (i): system calls per file under strace (counts only; strace slows every client alike): haul -i to
# the disk, the library's (a) on tmpfs, the bare program and curl --parallel, same list.
command -v strace > /dev/null || apt-get install -y -q strace > /dev/null
syscalls() {  # syscalls CLIENT WHERE COMMAND…: one JSON line of per-file counts
    local client=$1 where=$2; shift 2
    strace -f -c -o "$work/strace.txt" "$@" > /dev/null 2>&1
    python3 - "$work/strace.txt" "$client" "$where" "$count" >> "$results" <<'PY'
import json, sys
path, client, where, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
calls = {}
for line in open(path):
    parts = line.split()
    if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
        calls[parts[-1]] = int(parts[3])
print(json.dumps({"scenario": "syscalls", "client": client, "where": where, "files": count,
                  "perFile": {name: round(n / count, 2) for name, n in calls.items()}}))
PY
}
echo "== (i) system calls per file (strace -f -c)"
rm -rf "$disk_dir"; mkdir -p "$disk_dir"
syscalls haul disk "$haul_cli" --quiet -j 100 -o "$disk_dir" -i "$work/haul.list"
rm -rf "$disk_dir"; mkdir -p "$disk_dir"
sed "s|$work/out|$disk_dir|" "$work/curl.config" > "$work/curl-cli.config"
syscalls curl disk curl -s --parallel --parallel-max 100 --create-dirs -K "$work/curl-cli.config"
rm -rf "$disk_dir"; mkdir -p "$disk_dir"
syscalls libcurl-multi disk .build/many "$base" "$count" 100 "$disk_dir"
rm -rf "$disk_dir" "$work/out"; mkdir -p "$work/out"
syscalls haul-library tmpfs "$bin/haul-bench" many haul "$base" "$count" 100 "$work/out"
rm -rf "$work/out"

run_many_h2() {  # run_many_h2 CLIENT: one round of (e) for CLIENT (haul or curl), checked
    rm -rf "$work/out"; mkdir -p "$work/out"
    if [ "$1" = curl ]; then
        timed many-h2 curl curl -s --parallel --parallel-max 100 --cacert "$work/cert.pem" --create-dirs -K "$work/curl-h2.config"
    else
        HAUL_CA_FILE="$work/cert.pem" bench many-h2 haul "$tls_base" "$count" 100 "$work/out" >> "$results"
    fi
    check "$1"
}

echo "== (e) $count files of 64 KiB over HTTPS (HTTP/2), 100 in flight"
sed "s|$base|$tls_base|" "$work/curl.config" > "$work/curl-h2.config"
for round in $(seq 1 "$repeat"); do
    for client in $(rotated "$round" haul curl); do run_many_h2 "$client"; done
done

run_one() {  # run_one CLIENT: one round of (b) for CLIENT
    rm -rf "$work/one"; mkdir -p "$work/one"
    if [ "$1" = curl ]; then
        timed one curl curl -s -o "$work/one/big.bin" "$base/big.bin"
    else
        bench one "$1" "$base/big.bin" "$work/one/big.bin" >> "$results"
    fi
}

echo "== (b) one 1 GiB file"
warm
for round in $(seq 1 "$repeat"); do
    for client in $(rotated "$round" haul ahc urlsession curl); do run_one "$client"; done
done
rm -rf "$work/one"

echo "== (b) one 1 GiB file over 4 connections (Haul; not slower than over one)"
warm
for round in $(seq 1 "$repeat"); do
    rm -rf "$work/one"; mkdir -p "$work/one"
    bench split haul one-x4 "$base/big.bin" "$work/one/big.bin" 4 $((20 * 1024 * 1024)) >> "$results"
    cmp -s "$work/one/big.bin" "$work/www/big.bin" || { echo "(b) over 4 connections: wrong bytes"; exit 1; }
done
rm -rf "$work/one"

run_split() {  # run_split CLIENT N: one round of (f) for CLIENT (haul or aria2c) over N connections, checked
    rm -rf "$work/split"; mkdir -p "$work/split"
    if [ "$1" = aria2c ]; then
        timed "split-$2" aria2c aria2c -q -x "$2" -s "$2" -k 20M --file-allocation=falloc --allow-overwrite=true \
            --auto-file-renaming=false --check-certificate=false -d "$work/split" -o big.bin "$base/perconn/big.bin"
    else
        bench split haul "split-$2" "$base/perconn/big.bin" "$work/split/big.bin" "$2" $((20 * 1024 * 1024)) >> "$results"
    fi
    cmp -s "$work/split/big.bin" "$work/www/big.bin" || { echo "(f) $1 over $2 connections: wrong bytes"; exit 1; }
}

echo "== (f) one 1 GiB file, ${PERCONN:-32m}/s per connection, over 1, 4 and 8 connections"
command -v aria2c > /dev/null || apt-get install -y -q aria2 > /dev/null
warm
for round in $(seq 1 "$repeat"); do
    for n in 1 4 8; do
        for client in $(rotated "$round" haul aria2c); do run_split "$client" "$n"; done
    done
done
rm -rf "$work/split"

echo "== (c) $live transfers live at once (2 KB/s each)"
rm -rf "$work/live"; mkdir -p "$work/live"
bench live haul "$base/limited" "$live" "$work/live" >> "$results"
rm -rf "$work/live"; mkdir -p "$work/live"
.build/multi "$base/limited" "$live" "$work/live" >> "$results"
rm -rf "$work/live"

echo "== (g) rate limits: per download, per host, in total, measured over 10 s"
other_base="http://localhost:$port"
for round in $(seq 1 "$repeat"); do
    for kind in download host total; do
        rm -rf "$work/rate"; mkdir -p "$work/rate"
        "$bin/haul-bench" rate "$kind" "${RATE:-5000000}" "$base" "$other_base" "$work/rate" >> "$results"
    done
done
rm -rf "$work/rate"

echo "== (d) $queued URLs enqueued"
rm -rf "$work/queue"; mkdir -p "$work/queue"
"$bin/haul-bench" queue "$base/limited" "$queued" "$work/queue/state" >> "$results"
rm -rf "$work/queue"

# (j): the fleet's queue in PostgreSQL (a throwaway cluster of this run's own, fsync off as in the
# tests): rows claimed and recorded completed per second by 1, 2 and 4 worker processes (fleet-bench:
# batches of 100, no HTTP), then (a)'s list through `haul worker` beside `haul -i` (SQLite), same rounds.
echo "== (j) the fleet's queue in PostgreSQL"
fleet_rows="${FLEET_ROWS:-20000}"
pg_port=$((port + 2))
pg_dir="$(mktemp -u /tmp/haul-bench-pg.XXXXXX)"   # not under $work: the postgres user cannot enter it
bash ../scripts/postgres-cluster.sh start "$pg_dir" "$pg_port" bench-pw $$
fleet_url="postgres://haul:bench-pw@127.0.0.1:$pg_port"
fleet_db() { PGPASSWORD=bench-pw psql -h 127.0.0.1 -p "$pg_port" -U haul -d postgres -qc "CREATE DATABASE $1"; }
for round in $(seq 1 "$repeat"); do
    for workers in 1 2 4; do
        db="claims_${workers}_$round"
        fleet_db "$db"
        "$bin/fleet-bench" fill "$fleet_url/$db" "$fleet_rows" > /dev/null
        started=$(date +%s.%N)
        for _ in $(seq 1 "$workers"); do "$bin/fleet-bench" claims "$fleet_url/$db" 100 > /dev/null & done
        wait
        ended=$(date +%s.%N)
        echo "{\"scenario\":\"fleet-claims\",\"client\":\"haul\",\"workers\":$workers,\"rows\":$fleet_rows,\"wallSeconds\":$(awk -v a="$started" -v b="$ended" 'BEGIN { printf "%.3f", b - a }')}" >> "$results"
    done
    db="run_$round"
    fleet_db "$db"
    "$haul_cli" --queue "$fleet_url/$db" -i "$work/haul.list" --quiet
    for client in $(rotated "$round" haul-worker haul); do
        rm -rf "$work/out"; mkdir -p "$work/out"
        if [ "$client" = haul-worker ]; then
            timed fleet-run haul-worker "$haul_cli" worker --queue "$fleet_url/$db" -o "$work/out" -j 100 --until-empty --quiet
        else
            timed fleet-run haul "$haul_cli" --quiet -j 100 -o "$work/out" -i "$work/haul.list"
        fi
        check "(j) $client"
    done
done
bash ../scripts/postgres-cluster.sh stop "$pg_dir"
rm -rf "$work/out"

# (k) and (l), bodies that are not files: a script of their own (its own nginx), same rounds.
ROUNDS="$repeat" COUNT="$count" bash bodies.sh > /dev/null
# (m), the load generator beside hey, wrk and h2load: a script of its own too (load.jsonl).
ROUNDS="$repeat" LIVE="$live" bash load.sh > /dev/null
# Where a body's CPU goes in (a), (e), (k) and (m), by activity and by what pays (profile.jsonl).
COUNT="$count" bash profile.sh > /dev/null
python3 report.py "$results" bodies.jsonl load.jsonl profile.jsonl $(ls profile-before.jsonl 2>/dev/null) > RESULTS.md
cat RESULTS.md
