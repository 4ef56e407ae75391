#!/usr/bin/env bash
# Haul's main job, end to end: start a local nginx with generated files, download them with `haul`
# (live progress on a terminal), interrupt once with SIGINT, run the same command again to resume,
# verify every byte, and stop nginx.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/opt/swift/usr/bin"
bash scripts/install-deps.sh
swift build -c release --product haul
haul="$(swift build -c release --show-bin-path)/haul"

work="$(mktemp -d /tmp/haul-demo.XXXXXX)"
mkdir -p "$work/www" "$work/logs" "$work/tmp"
head -c $((96 * 1024 * 1024)) /dev/urandom > "$work/www/big.bin"
head -c $((24 * 1024 * 1024)) /dev/urandom > "$work/www/medium.bin"
for i in 1 2 3 4 5 6; do head -c $((512 * 1024 + i * 777)) /dev/urandom > "$work/www/small-$i.bin"; done
write_config() {
cat > "$work/nginx.conf" <<CONF
daemon on;
worker_processes 1;
user root;
pid $work/nginx.pid;
error_log $work/logs/error.log;
events { worker_connections 1024; }
http {
    log_format haul '\$request_uri \$status \$body_bytes_sent "\$http_range"';
    access_log $work/logs/access.log haul;
    client_body_temp_path $work/tmp; proxy_temp_path $work/tmp; fastcgi_temp_path $work/tmp;
    uwsgi_temp_path $work/tmp; scgi_temp_path $work/tmp;
    server {
        listen 127.0.0.1:$port;
        root $work/www;
        limit_rate 16m;   # slow enough to watch the progress bars
    }
}
CONF
}
# A free loopback port: try random ones until nginx can listen.
for attempt in $(seq 1 20); do
    port=$((10000 + RANDOM % 22000))   # below the ports of outgoing connections (32768 and up)
    write_config
    if nginx -p "$work" -c "$work/nginx.conf" -e "$work/logs/error.log" 2>/dev/null; then break; fi
    if ((attempt == 20)); then echo "nginx could not start:"; cat "$work/logs/error.log"; exit 1; fi
done
# Stop nginx before its folder (and pid file) goes: removing the folder first left nginx running.
trap 'nginx -p "$work" -c "$work/nginx.conf" -e "$work/logs/error.log" -s stop 2>/dev/null || true; rm -rf "$work"' EXIT

urls=("http://127.0.0.1:$port/big.bin" "http://127.0.0.1:$port/medium.bin")
for i in 1 2 3 4 5 6; do urls+=("http://127.0.0.1:$port/small-$i.bin"); done
out="$work/out"

echo "== 1. download, interrupted with SIGINT after 2 seconds"
set +e
timeout --foreground --preserve-status -s INT 2 "$haul" -j 4 -o "$out" "${urls[@]}"
status=$?
set -e
echo "haul exited with $status (130 = interrupted; the partial files are kept in $out/.haul)"
echo "partial files kept: $(find "$out/.haul" -name '*.part' | wc -l); the journal says:"
"$haul" --list -o "$out"

echo "== 2. the same command again: resumes where it stopped"
"$haul" -j 4 -o "$out" "${urls[@]}"

echo "== 3. verify"
for file in big.bin medium.bin small-{1..6}.bin; do
    cmp "$work/www/$file" "$out/$file"
done
echo "all $((2 + 6)) files are byte-identical to the served ones"
echo "requests that resumed with a Range header:"
grep -v '"-"' "$work/logs/access.log" || echo "(none: the interruption came before any partial file)"
echo "output directory: $(ls -A "$out" | tr '\n' ' ')"
