#!/usr/bin/env bash
# Installs what is missing, checks the formatting, builds, and runs every test (unit and integration
# against a real nginx that the tests start themselves).
#
#   scripts/test.sh              everything, once (what CI runs)
#   scripts/test.sh --repeat N   builds once, runs the tests N times whatever fails, and reports each
#                                test that failed in any run (and in how many): a flake is found
#                                before CI finds it. Exit 1 when any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/opt/swift/usr/bin"
repeat=0
if [ "${1:-}" = "--repeat" ]; then
    repeat="${2:-}"
    [[ "$repeat" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [--repeat N]" >&2; exit 64; }
fi
bash scripts/install-deps.sh
# At most twice as many tests at once as there are cores (Swift Testing's width; CONTRIBUTING.md):
# unbounded, about 130 integration tests ran together on two cores, each with its manager, loop and
# servers, and tens of them passed their time limits together (issue 75).
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-$((2 * $(nproc)))}"
# The tests' watchdog (Tests/HaulTestSupport/Watchdog.swift) writes every thread's stack of a test
# that has run for more than 20 s into this folder; what it wrote is printed when this script ends.
# The suites run alone take minutes by design: they get limits of their own below.
export HAUL_TEST_WATCHDOG_DIR="${HAUL_TEST_WATCHDOG_DIR:-$(mktemp -d /tmp/haul-watchdog.XXXXXX)}"
print_watchdog() {
    for file in "$HAUL_TEST_WATCHDOG_DIR"/haul-watchdog-*.txt; do
        [ -e "$file" ] || continue
        echo "=== the watchdog wrote $file (its first 400 lines) ==="
        head -n 400 "$file"
    done
}
trap print_watchdog EXIT
# The suites that run alone, after the others (their load would starve the others' timing; below).
alone=(SoakTests GigabyteStreamTests FleetProcessTests DiskFaultTests)
skip_alone=()
for suite in "${alone[@]}"; do skip_alone+=(--skip "$suite"); done
if [ "$repeat" -gt 0 ]; then
    swift build --build-tests
    failures="$(mktemp)"
    for run in $(seq 1 "$repeat"); do
        log="$(mktemp)"
        started=$SECONDS
        status=0
        { timeout 900 swift test --skip-build "${skip_alone[@]}" \
            && for suite in "${alone[@]}"; do
                HAUL_TEST_WATCHDOG_SECONDS=480 timeout 600 swift test --skip-build --filter "$suite" || exit 1
            done; } > "$log" 2>&1 || status=$?
        # Swift Testing's "✘ Test NAME failed" lines and XCTest's; a hang shows as the timeout's status.
        failed="$(grep -aE '^✘ Test .* (failed|recorded an issue)' "$log" | sed -E 's/ (failed after|recorded an issue).*//' | sort -u || true)"
        [ "$status" -ne 0 ] && [ -z "$failed" ] && failed="(run $run ended with status $status and no failed test named: a hang or a crash)"
        [ -n "$failed" ] && printf '%s\n' "$failed" >> "$failures"
        echo "run $run of $repeat: $([ "$status" -eq 0 ] && echo passed || echo FAILED) in $((SECONDS - started)) s"
        [ "$status" -ne 0 ] && cp "$log" "/tmp/haul-test-run-$run.log" && echo "  its output: /tmp/haul-test-run-$run.log"
        rm -f "$log"
    done
    if [ -s "$failures" ]; then
        echo "tests that failed, and in how many of $repeat runs:"
        sort "$failures" | uniq -c | sort -rn
        rm -f "$failures"
        exit 1
    fi
    rm -f "$failures"
    echo "every test passed in each of $repeat runs"
    exit 0
fi
# The toolchain's swift-format, with the repository's .swift-format (120 columns, ordered imports).
swift format lint --strict -r Sources Examples Tests
# ARCHITECTURE.md's rule, checked: between the library's targets the compiler keeps it; within one, a
# folder refers to none above it (known exceptions in scripts/layers-allowed.txt, which only shrinks).
python3 scripts/check-layers.py
swift build --build-tests
# A backstop: a hung test fails CI in minutes, not at its 90-minute limit.
timeout 900 swift test --skip-build "${skip_alone[@]}"
# The soak (2,000 files through a fault relay, haul SIGKILLed ten times) runs alone too: its thousand
# connections and ten processes would starve the suite's timing.
soak_log="$(mktemp)"
HAUL_TEST_WATCHDOG_SECONDS=240 timeout 300 swift test --skip-build --filter SoakTests > "$soak_log" 2>&1 || { cat "$soak_log"; exit 1; }
grep -E "Test run with 1 test in 1 suite passed" "$soak_log" || { cat "$soak_log"; echo "SoakTests did not run" >&2; exit 1; }
grep "haul soak:" "$soak_log" || true
rm -f "$soak_log"
# A gigabyte streamed to a slow reader runs alone too: four kernel copies of 1 GiB beside the suite
# starved the SIGKILL tests' timing.
gigabyte_log="$(mktemp)"
HAUL_TEST_WATCHDOG_SECONDS=240 timeout 300 swift test --skip-build --filter GigabyteStreamTests > "$gigabyte_log" 2>&1 || { cat "$gigabyte_log"; exit 1; }
grep -E "Test run with 1 test in 1 suite passed" "$gigabyte_log" || { cat "$gigabyte_log"; echo "GigabyteStreamTests did not run" >&2; exit 1; }
rm -f "$gigabyte_log"
# The worker-process tests (PostgreSQL, nginx and haul workers over thousands of files, both cores
# busy) run alone: beside the suite they starved the timing of the SIGKILL and segment tests.
fleet_log="$(mktemp)"
HAUL_TEST_WATCHDOG_SECONDS=480 timeout 600 swift test --skip-build --filter FleetProcessTests > "$fleet_log" 2>&1 || { cat "$fleet_log"; exit 1; }
grep -E "Test run with [0-9]+ tests? in 1 suite passed" "$fleet_log" || { cat "$fleet_log"; echo "FleetProcessTests did not run" >&2; exit 1; }
rm -f "$fleet_log"
# Every write, sync, rename and link of a small run failing in turn (an LD_PRELOAD shim, as SQLite
# tests its I/O errors): two hundred short haul processes, alone so that they time nothing else.
faults_log="$(mktemp)"
HAUL_TEST_WATCHDOG_SECONDS=480 timeout 600 swift test --skip-build --filter DiskFaultTests > "$faults_log" 2>&1 || { cat "$faults_log"; exit 1; }
grep -E "Test run with 1 test in 1 suite passed" "$faults_log" || { cat "$faults_log"; echo "DiskFaultTests did not run" >&2; exit 1; }
rm -f "$faults_log"
# The DocC catalog builds without a warning: every symbol and article it names exists.
# Haul's own graphs only: the dependencies' (swift-distributed-tracing's) link articles of their own catalogs.
rm -rf .build/symbol-graphs .build/symbol-graphs-haul .build/docc
swift build --target Haul -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc .build/symbol-graphs
mkdir -p .build/symbol-graphs-haul
cp .build/symbol-graphs/Haul.symbols.json .build/symbol-graphs/Haul@*.symbols.json .build/symbol-graphs-haul/ 2>/dev/null || true
# Every public type of the module is in the catalog's topics (nested ones come with their parent).
python3 - .build/symbol-graphs-haul/Haul.symbols.json Sources/Haul/Haul.docc/Haul.md <<'PY'
import json, sys
graph, page = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
kinds = {"swift.struct", "swift.class", "swift.enum", "swift.protocol", "swift.typealias"}
types = {s["pathComponents"][0] for s in graph["symbols"] if s["kind"]["identifier"] in kinds and len(s["pathComponents"]) == 1}
missing = sorted(t for t in types if "``" + t + "``" not in page)
if missing:
    sys.exit("public types missing from Haul.md's topics: " + ", ".join(missing))
PY
docc convert Sources/Haul/Haul.docc --additional-symbol-graph-dir .build/symbol-graphs-haul --output-path .build/docc \
    --fallback-display-name Haul --fallback-bundle-identifier haul --warnings-as-errors
# The README's own documentation command: what it documents is what users read (scripts/check-docs.py).
docs_log="$(mktemp)"
swift package generate-documentation --target Haul > "$docs_log" 2>&1 || { cat "$docs_log"; exit 1; }
python3 scripts/check-docs.py "$docs_log"
rm -f "$docs_log"
# Every Swift sample of the README and of the DocC articles compiles as written, imports included,
# in a package of its own that depends on Haul by path (Examples/samples; scripts/samples.py).
bash Examples/samples/build.sh
# The installer: haul, its man page and its completions under a prefix (staged; the debug build
# this script made). The man page and the completions know every option, the worker's too.
stage="$(mktemp -d)"
CONFIGURATION=debug DESTDIR="$stage" bash scripts/install.sh /usr/local > /dev/null
installed="$stage/usr/local"
"$installed/bin/haul" --version
grep -q '^\.Sh NAME' "$installed/share/man/man1/haul.1" && grep -q -- '-continue' "$installed/share/man/man1/haul.1"
grep -q 'haul worker' "$installed/share/man/man1/haul.1"
completed="$(bash -c 'source "$1"; COMP_LINE="haul worker --qu"; COMP_POINT=${#COMP_LINE}
    COMP_WORDS=(haul worker --qu); COMP_CWORD=2; _haul haul --qu worker; printf "%s\n" "${COMPREPLY[@]}"' \
    - "$installed/share/bash-completion/completions/haul")"
[[ "$completed" == *--queue* ]] || { echo "bash completion of 'haul worker --qu': $completed" >&2; exit 1; }
grep -q -- '--max-time' "$installed/share/zsh/site-functions/_haul"
grep -q -- 'max-time' "$installed/share/fish/vendor_completions.d/haul.fish"
rm -rf "$stage"
echo "installer: haul, haul.1, bash, zsh and fish completions"
# The example service (Examples/service, a package of its own with Hummingbird and
# swift-prometheus): built, started, driven over HTTP, stopped with SIGTERM mid-download, restarted.
bash Examples/service/test.sh
