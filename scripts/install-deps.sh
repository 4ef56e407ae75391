#!/usr/bin/env bash
# Installs the Debian packages Haul builds and tests with, when any is missing. Run as root.
set -euo pipefail
packages=(libevent-dev libcurl4-openssl-dev libsqlite3-dev libssl-dev sqlite3 nginx curl openssl tmux gzip tinyproxy
          libpq-dev pkg-config postgresql haproxy chromium gcc libc6-dev gdb apache2 lighttpd e2fsprogs mount
          btrfs-progs)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
# The test command's small checks are Python (any python3 will do: Debian's when there is none).
command -v python3 >/dev/null || missing+=(python3)
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # The servers are the tests' own, started on free ports: none is started as a system service by
    # its installation (nginx, Apache and lighttpd would each want port 80, and the second's
    # installation would fail). Debian's policy-rc.d says so, when there is none already.
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
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
