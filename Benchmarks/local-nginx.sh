# Sourced by the benchmark scripts: one nginx on loopback serving WORK/www, which gets the 1,000
# files of 64 KiB (f0.bin … f999.bin) their lists name; local_nginx_start over HTTP/1.1 (compare.sh,
# shared-folder.sh, bodies.sh), tls_nginx_start over HTTP/1.1 and over HTTPS with HTTP/2 (a
# self-signed certificate, WORK/cert.pem) with /limited/ at 2 KB/s per response (load.sh,
# profile.sh). (run.sh has its own: more locations.) nginx_stop WORK stops either. settle_disk: the
# page cache of the last run on the disk dropped before the next run (run.sh, compare.sh).
# build_revision: a revision's release builds, for the scripts that set builds side by side.

build_products() {  # build_products PRODUCT…: release builds, their errors shown when one fails
    local log product
    log="$(mktemp)"
    for product in "$@"; do
        swift build -c release --product "$product" > "$log" 2>&1 || { cat "$log"; rm -f "$log"; exit 1; }
    done
    rm -f "$log"
}

# Sets port to a free port below the kernel's range for outgoing connections (a port picked in it
# can be held by a client socket of an earlier run), with port + 1 free too.
pick_ports() {
    local first_local_port
    first_local_port=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    port=$((10000 + RANDOM % (first_local_port - 10002)))
    while ss -ltnH "( sport = :$port or sport = :$((port + 1)) )" 2>/dev/null | grep -q .; do
        port=$((10000 + RANDOM % (first_local_port - 10002)))
    done
}

# Sets built_cli, built_lib and built_commit: REVISION's `haul` and `haul-bench`, built (release) in
# a worktree under Benchmarks/.build-compare/ (compare.sh, counts.sh); quiet unless a build fails
# (the dependencies' warnings drown the tables otherwise).
build_revision() {  # build_revision REVISION
    local builds="$PWD/.build-compare" tree
    built_commit="$(git rev-parse --verify "$1^{commit}")"
    tree="$builds/$built_commit"
    mkdir -p "$builds"
    [ -d "$tree" ] || git worktree add -f --detach "$tree" "$built_commit" > /dev/null 2>&1
    (cd "$tree" && swift build -c release --product haul > "$builds/build.log" 2>&1) || { cat "$builds/build.log"; exit 1; }
    (cd "$tree/Benchmarks" && swift build -c release --product haul-bench > "$builds/build.log" 2>&1) \
        || { cat "$builds/build.log"; exit 1; }
    built_cli="$(cd "$tree" && swift build -c release --show-bin-path)/haul"
    built_lib="$(cd "$tree/Benchmarks" && swift build -c release --show-bin-path)/haul-bench"
}

nginx_conf() {  # nginx_conf WORK HTTP-DIRECTIVES SERVER: WORK/nginx.conf, one worker, no access log
    cat > "$1/nginx.conf" <<CONF
daemon on;
worker_processes 1;
worker_rlimit_nofile 65536;
user root;
pid $1/nginx.pid;
error_log $1/error.log;
events { worker_connections 60000; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $1/tmp; proxy_temp_path $1/tmp; fastcgi_temp_path $1/tmp;
    uwsgi_temp_path $1/tmp; scgi_temp_path $1/tmp;
    $2
    $3
}
CONF
}

local_nginx_start() {  # local_nginx_start WORK: sets port and base
    local work=$1 i
    mkdir -p "$work/www" "$work/tmp"
    for i in $(seq 0 999); do head -c 65536 /dev/urandom > "$work/www/f$i.bin"; done
    pick_ports
    nginx_conf "$work" "" "server { listen 127.0.0.1:$port backlog=65535; root $work/www; }"
    nginx -p "$work" -c "$work/nginx.conf" -e "$work/error.log"
    base="http://127.0.0.1:$port"
}

nginx_stop() {  # nginx_stop WORK
    nginx -p "$1" -c "$1/nginx.conf" -e "$1/error.log" -s stop 2>/dev/null || true
}

tls_nginx_start() {  # tls_nginx_start WORK: sets port, tls_port, base and tls_base
    local work=$1 i
    mkdir -p "$work/www" "$work/tmp"
    for i in $(seq 0 999); do head -c 65536 /dev/urandom > "$work/www/f$i.bin"; done
    pick_ports
    tls_port=$((port + 1))
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
        -keyout "$work/key.pem" -out "$work/cert.pem" 2> /dev/null
    nginx_conf "$work" "http2_max_concurrent_streams 128; open_file_cache max=2000;" "server {
        listen 127.0.0.1:$port backlog=65535;
        listen 127.0.0.1:$tls_port ssl http2 backlog=65535;
        ssl_certificate $work/cert.pem;
        ssl_certificate_key $work/key.pem;
        root $work/www;
        location /limited/ { alias $work/www/; limit_rate 2k; }
    }"
    nginx -p "$work" -c "$work/nginx.conf" -e "$work/error.log"
    base="http://127.0.0.1:$port"
    tls_base="https://127.0.0.1:$tls_port"
}

# Before each run on the disk (and, in compare.sh, before every run): the last disk run's files
# written back, then their pages dropped from the page cache (the programs' own pages stay). Kept,
# the 30-odd runs' 650 MB each outgrew free memory half-way through, and every client of the later
# rounds paid for reclaiming pages (the bare programs too took twice the time and twice the CPU of
# the first round); in compare.sh, the run after each disk run took up to twice its time.
last_disk_out=""
settle_disk() {  # settle_disk [OUT]: before a run; OUT, the disk folder it writes, is dropped before the next
    sync
    if [ -n "$last_disk_out" ]; then
        python3 - "$last_disk_out" <<'PY'
import os, sys
for root, _, files in os.walk(sys.argv[1]):
    for name in files:
        try:
            descriptor = os.open(os.path.join(root, name), os.O_RDONLY)
        except OSError:
            continue
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(descriptor)
PY
    fi
    if [ $# -gt 0 ]; then last_disk_out="$1"; fi
}
