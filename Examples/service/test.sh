#!/usr/bin/env bash
# The example service's integration test: builds it, starts a local nginx and the service, drives it
# with real HTTP requests, compares every file with its source, reads /metrics, stops the service
# with SIGTERM in the middle of a download and checks that the next start finishes it.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/opt/swift/usr/bin"
swift build --product haul-service
bin="$(swift build --show-bin-path)/haul-service"

work="$(mktemp -d /tmp/haul-service-test.XXXXXX)"
mkdir -p "$work/www" "$work/logs" "$work/tmp" "$work/out"
head -c 200000 /dev/urandom > "$work/www/a.bin"
head -c 3000000 /dev/urandom > "$work/www/b.bin"
head -c 3000000 /dev/urandom > "$work/www/slow.bin"
# Two ports below the kernel's range for outgoing connections (32768 and up on Debian), where a
# client socket of an earlier run can hold a port; none a server listens on.
first_local_port=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
nginx_port=$((10000 + RANDOM % (first_local_port - 10002)))
while ss -ltnH "( sport = :$nginx_port or sport = :$((nginx_port + 1)) )" 2>/dev/null | grep -q .; do
    nginx_port=$((10000 + RANDOM % (first_local_port - 10002)))
done
service_port=$((nginx_port + 1))
cat > "$work/nginx.conf" <<CONF
daemon on; worker_processes 1; user root; pid $work/nginx.pid; error_log $work/logs/error.log;
events { worker_connections 256; }
http {
    access_log $work/logs/access.log;
    client_body_temp_path $work/tmp; proxy_temp_path $work/tmp; fastcgi_temp_path $work/tmp;
    uwsgi_temp_path $work/tmp; scgi_temp_path $work/tmp;
    # A first request gets 512 KB at once, then 64 KB/s: a download the test can stop in the
    # middle; a request for a range (the resume) is not limited.
    map \$http_range \$slow_rate { "" 64k; default 0; }
    server {
        listen 127.0.0.1:$nginx_port;
        root $work/www;
        location /slow/ { alias $work/www/; limit_rate_after 512k; limit_rate \$slow_rate; }
    }
}
CONF
service_pid=""
cleanup() {
    [ -n "$service_pid" ] && kill -KILL "$service_pid" 2>/dev/null || true
    nginx -p "$work" -c "$work/nginx.conf" -e "$work/logs/error.log" -s stop 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
nginx -p "$work" -c "$work/nginx.conf" -e "$work/logs/error.log"
files="http://127.0.0.1:$nginx_port"
api="http://127.0.0.1:$service_port"

fail() { echo "service test: $*" >&2; [ -f "$work/service.log" ] && tail -20 "$work/service.log" >&2; exit 1; }
start() {
    HAUL_SERVICE_PORT=$service_port HAUL_SERVICE_FOLDER="$work/out" "$bin" >> "$work/service.log" 2>&1 &
    service_pid=$!
    # Ready when it answers (at most 30 s).
    for _ in $(seq 300); do curl -s -o /dev/null "$api/metrics" && return; sleep 0.1; done
    fail "the service did not start"
}
state() { curl -s "$api/downloads/$1" | sed -n 's/.*"state":"\([^"]*\)".*/\1/p'; }
wait_for() {  # wait_for ID STATE: polls the service (at most 60 s)
    for _ in $(seq 600); do [ "$(state "$1")" = "$2" ] && return; sleep 0.1; done
    fail "download $1 never reached $2 (now $(state "$1"))"
}
post() {
    local id
    id=$(curl -s -X POST "$api/downloads?url=$1&name=$2" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
    [ -n "$id" ] || fail "POST of $1 gave no id"
    echo "$id"
}

start
# Bad input is refused, not fatal.
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$api/downloads?url=$files/a.bin&name=../x")" = 400 ] || fail "a name with a folder was accepted"
a=$(post "$files/a.bin" a.bin)
b=$(post "$files/b.bin" b.bin)
wait_for "$a" completed
wait_for "$b" completed
cmp "$work/out/a.bin" "$work/www/a.bin" || fail "a.bin differs from its source"
cmp "$work/out/b.bin" "$work/www/b.bin" || fail "b.bin differs from its source"
metrics="$(curl -s "$api/metrics")"
grep -q '^haul_downloads_completed_total 2$' <<< "$metrics" || fail "completed downloads not counted: $(grep haul_ <<< "$metrics" | head -5)"
grep -q '^haul_received_bytes_total 3200000$' <<< "$metrics" || fail "received bytes not counted"
grep -q '^haul_download_duration_seconds_count 2$' <<< "$metrics" || fail "durations not recorded"

# SIGTERM in the middle of a download: a graceful shutdown keeps its bytes.
slow=$(post "$files/slow/slow.bin" slow.bin)
partial="$work/out/.haul/$slow.part"
for _ in $(seq 300); do [ -s "$partial" ] && [ "$(stat -c %s "$partial")" -ge 524288 ] && break; sleep 0.1; done
[ -s "$partial" ] || fail "the slow download wrote nothing"
kill -TERM "$service_pid"
wait "$service_pid" || fail "the service exited with $? on SIGTERM"
service_pid=""
kept=$(stat -c %s "$partial")
[ "$kept" -ge 524288 ] || fail "the partial file kept $kept bytes"
cmp -n "$kept" "$partial" "$work/www/slow.bin" || fail "the partial file is not the source's start"
[ ! -e "$work/out/slow.bin" ] || fail "an unfinished file appeared at its destination"

# The next start continues it from those bytes (a range request) and finishes it.
start
wait_for "$slow" completed
cmp "$work/out/slow.bin" "$work/www/slow.bin" || fail "slow.bin differs from its source"
grep -q '"GET /slow/slow.bin HTTP/1.1" 206 ' "$work/logs/access.log" || fail "the next start did not resume with a range"
kill -TERM "$service_pid"; wait "$service_pid"; service_pid=""
echo "service test: passed (2 files, metrics, a download stopped by SIGTERM and finished by the next start)"
