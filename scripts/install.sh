#!/usr/bin/env bash
# Installs the `haul` command as a tool is installed: the program, its man page (made by
# swift-argument-parser's generate-manual from haul's own help) and its bash, zsh and fish
# completions (haul --generate-completion-script), under a prefix.
#
#   bash scripts/install.sh [PREFIX]      PREFIX: /usr/local by default (or $PREFIX)
#   DESTDIR=/tmp/stage bash scripts/install.sh /usr     staged, as `make install` honours DESTDIR
#   CONFIGURATION=debug: the debug build instead (the test command's check, which has it built)
#
# Installs the Debian packages building needs when any is missing (run as root for that).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/opt/swift/usr/bin"
prefix="${1:-${PREFIX:-/usr/local}}"
root="${DESTDIR:-}$prefix"
configuration="${CONFIGURATION:-release}"

packages=(libevent-dev libcurl4-openssl-dev libsqlite3-dev libssl-dev)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v swift >/dev/null || { echo "error: Swift 6 is needed (https://www.swift.org/install/linux/)" >&2; exit 1; }

swift build -c "$configuration" --product haul
swift build -c "$configuration" --product generate-manual
bin="$(swift build -c "$configuration" --show-bin-path)"
made="$(mktemp -d /tmp/haul-install.XXXXXX)"
trap 'rm -rf "$made"' EXIT
"$bin/generate-manual" "$bin/haul" --authors "Haul's developers" --output-directory "$made"
"$bin/haul" --generate-completion-script bash > "$made/haul.bash"
"$bin/haul" --generate-completion-script zsh > "$made/_haul"
"$bin/haul" --generate-completion-script fish > "$made/haul.fish"

install -d "$root/bin" "$root/share/man/man1" "$root/share/bash-completion/completions" \
    "$root/share/zsh/site-functions" "$root/share/fish/vendor_completions.d"
install -m 0755 "$bin/haul" "$root/bin/haul"
install -m 0644 "$made/haul.1" "$root/share/man/man1/haul.1"
install -m 0644 "$made/haul.bash" "$root/share/bash-completion/completions/haul"
install -m 0644 "$made/_haul" "$root/share/zsh/site-functions/_haul"
install -m 0644 "$made/haul.fish" "$root/share/fish/vendor_completions.d/haul.fish"
echo "installed into $root: bin/haul, share/man/man1/haul.1, bash, zsh and fish completions"
