#!/usr/bin/env bash
# Extracts every Swift sample of the README and the DocC articles (scripts/samples.py) and builds
# them in this package, which depends on Haul by path as a user's package does. An error names the
# Markdown file and line of the sample.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/opt/swift/usr/bin"
python3 ../../scripts/samples.py ../.. Sources/Samples/Extracted
swift build --target Samples
echo "samples: $(ls Sources/Samples/Extracted | wc -l) compiled (README.md and Sources/Haul/Haul.docc)"
