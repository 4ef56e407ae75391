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
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
mkdir -p "$work/www" "$work/logs" "$work/tmp"
head -c $((96 * 1024 * 1024)) /dev/urandom > "$work/www/big.bin"
head -c $((24 * 1024 * 1024)) /dev/urandom > "$work/www/medium.bin"
for i in 1 2 3 4 5 6; do head -c $((512 * 1024 + i * 777)) /dev/urandom > "$work/www/small-$i.bin"; done
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
nginx -p "$work" -c "$work/nginx.conf" -e "$work/logs/error.log"
trap 'nginx -p "$work" -c "$work/nginx.conf" -e "$work/logs/error.log" -s stop 2>/dev/null || true' EXIT

urls=("http://127.0.0.1:$port/big.bin" "http://127.0.0.1:$port/medium.bin")
for i in 1 2 3 4 5 6; do urls+=("http://127.0.0.1:$port/small-$i.bin"); done
out="$work/out"

echo "== 1. download, interrupted with SIGINT after 2 seconds"
set +e
timeout --foreground --preserve-status -s INT 2 "$haul" -j 4 -o "$out" "${urls[@]}"
status=$?
set -e
echo "haul exited with $status (130 = interrupted; the partial files are kept in $out/.haul)"
ls -la "$out/.haul" | grep -c '\.part$' | xargs echo "partial files:"

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
rm -rf "$work"
