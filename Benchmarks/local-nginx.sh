# Sourced by compare.sh and shared-folder.sh: one nginx on loopback serving WORK/www, which gets the
# 1,000 files of 64 KiB (f0.bin … f999.bin) their lists name. (run.sh has its own: TLS, slow locations.)

local_nginx_start() {  # local_nginx_start WORK: sets port and base
    local work=$1 i first_local_port
    mkdir -p "$work/www" "$work/tmp"
    for i in $(seq 0 999); do head -c 65536 /dev/urandom > "$work/www/f$i.bin"; done
    # A port below the kernel's range for outgoing connections, that no server listens on.
    first_local_port=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    port=$((10000 + RANDOM % (first_local_port - 10002)))
    while ss -ltnH "( sport = :$port )" 2>/dev/null | grep -q .; do
        port=$((10000 + RANDOM % (first_local_port - 10002)))
    done
    cat > "$work/nginx.conf" <<CONF
daemon on;
worker_processes 1;
worker_rlimit_nofile 65536;
user root;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 60000; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $work/tmp; proxy_temp_path $work/tmp; fastcgi_temp_path $work/tmp;
    uwsgi_temp_path $work/tmp; scgi_temp_path $work/tmp;
    server { listen 127.0.0.1:$port backlog=65535; root $work/www; }
}
CONF
    nginx -p "$work" -c "$work/nginx.conf" -e "$work/error.log"
    base="http://127.0.0.1:$port"
}

local_nginx_stop() {  # local_nginx_stop WORK
    nginx -p "$1" -c "$1/nginx.conf" -e "$1/error.log" -s stop 2>/dev/null || true
}
