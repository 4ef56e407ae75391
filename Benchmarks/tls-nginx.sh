# Sourced by load.sh and profile.sh: one nginx on loopback over HTTP/1.1 and over HTTPS with HTTP/2
# (a self-signed certificate, WORK/cert.pem), serving WORK/www with its 1,000 files of 64 KiB
# (f0.bin … f999.bin) and /limited/ at 2 KB/s per response. (run.sh and bodies.sh have their own.)

tls_nginx_start() {  # tls_nginx_start WORK: sets port, tls_port, base and tls_base
    local work=$1 i first_local_port
    mkdir -p "$work/www" "$work/tmp"
    for i in $(seq 0 999); do head -c 65536 /dev/urandom > "$work/www/f$i.bin"; done
    # Ports below the kernel's range for outgoing connections, that no server listens on.
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
error_log $work/error.log;
events { worker_connections 60000; }
http {
    access_log off;
    keepalive_requests 1000000;
    http2_max_concurrent_streams 128;
    client_body_temp_path $work/tmp; proxy_temp_path $work/tmp; fastcgi_temp_path $work/tmp;
    uwsgi_temp_path $work/tmp; scgi_temp_path $work/tmp;
    open_file_cache max=2000;
    server {
        listen 127.0.0.1:$port backlog=65535;
        listen 127.0.0.1:$tls_port ssl http2 backlog=65535;
        ssl_certificate $work/cert.pem;
        ssl_certificate_key $work/key.pem;
        root $work/www;
        location /limited/ { alias $work/www/; limit_rate 2k; }
    }
}
CONF
    nginx -p "$work" -c "$work/nginx.conf" -e "$work/error.log"
    base="http://127.0.0.1:$port"
    tls_base="https://127.0.0.1:$tls_port"
}

tls_nginx_stop() {  # tls_nginx_stop WORK
    nginx -p "$1" -c "$1/nginx.conf" -e "$1/error.log" -s stop 2>/dev/null || true
}
