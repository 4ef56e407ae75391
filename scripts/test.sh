#!/usr/bin/env bash
# Installs what is missing, checks the formatting, builds, and runs every test (unit and integration
# against a real nginx that the tests start themselves).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/opt/swift/usr/bin"
bash scripts/install-deps.sh
# The toolchain's swift-format, with the repository's .swift-format (120 columns, ordered imports).
swift format lint --strict -r Sources Examples Tests
swift build --build-tests
# A backstop: a hung test fails CI in minutes, not at its 90-minute limit.
timeout 900 swift test --skip-build
