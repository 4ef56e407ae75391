#!/usr/bin/env bash
# Installs the Debian packages Haul builds and tests with, when any is missing. Run as root.
set -euo pipefail
packages=(libevent-dev libcurl4-openssl-dev libsqlite3-dev libssl-dev sqlite3 nginx curl openssl tmux gzip tinyproxy
          libpq-dev pkg-config postgresql haproxy chromium gcc libc6-dev gdb)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
# The test command's small checks are Python (any python3 will do: Debian's when there is none).
command -v python3 >/dev/null || missing+=(python3)
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! command -v swift >/dev/null; then
    if [[ -x /opt/swift/usr/bin/swift ]]; then
        echo "note: add /opt/swift/usr/bin to PATH" >&2
    else
        echo "error: Swift 6 is needed (https://www.swift.org/install/linux/)" >&2
        exit 1
    fi
fi
