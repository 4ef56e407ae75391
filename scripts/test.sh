#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit and integration against a real nginx
# that the tests start themselves).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/opt/swift/usr/bin"
bash scripts/install-deps.sh
swift build --build-tests
swift test --skip-build
