#!/usr/bin/env python3
"""Checks what `swift package generate-documentation --target Haul` (the README's command, run by the
test command, whose output is this script's input) documents (issue 76, item 4).

The plugin documents the symbols declared in the module `Haul` and none that `Haul` re-exports
(swift-docc-plugin#113, swiftlang/swift-package-manager#9101), so every public type users meet is to
be declared in `Haul`. The public types still declared in a layer below (HaulValues, HaulIO,
HaulTransfer, HaulScheduler) are listed in scripts/public-below.txt, which only shrinks: an unlisted
one fails, and so does a listed one that is no longer public there. DocC's warnings fail unless they
are about a listed type (a link the catalog or a comment makes to it, which resolves once it moves
up); SwiftPM's warnings about a dependency's files are not DocC's and are left out.
"""
import os, re, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
log = open(sys.argv[1]).read()
if "Generated documentation archive" not in log:
    sys.exit("check-docs: the documentation command did not finish:\n" + log[-3000:])

DECLARATION = re.compile(r"^(?:@\w+(?:\([^)]*\))?\s+)*public\s+(?:final\s+)?(?:class|struct|enum|actor|protocol|typealias)\s+([A-Z]\w*)", re.M)
below = {}
for target in ("HaulValues", "HaulIO", "HaulTransfer", "HaulScheduler"):
    for directory, _, names in os.walk(os.path.join(ROOT, "Sources", target)):
        for name in names:
            if name.endswith(".swift"):
                for found in DECLARATION.findall(open(os.path.join(directory, name)).read()):
                    below[found] = target

listed = set()
for line in open(os.path.join(ROOT, "scripts", "public-below.txt")):
    line = line.split("#", 1)[0].strip()
    if line:
        listed.add(line)

failures = [f"  {name} (public in {below[name]}): declare it in Haul, or list it" for name in sorted(set(below) - listed)]
failures += [f"  {name} is listed in scripts/public-below.txt but no longer public below Haul: remove the line"
             for name in sorted(listed - set(below))]
warnings = []
for line in log.splitlines():
    if "warning:" not in line or "found 1 file(s) which are unhandled" in line or re.search(r"found \d+ file\(s\) which are unhandled", line):
        continue
    missing = re.search(r"warning: '([^'/]+)[^']*' doesn't exist at", line)
    if missing and missing.group(1) in listed:
        continue
    warnings.append("  " + line.strip())
failures += warnings
if failures:
    sys.exit("check-docs: the README's documentation command:\n" + "\n".join(failures))
print(f"check-docs: no DocC warning but for the {len(listed)} public types still declared below Haul "
      f"(scripts/public-below.txt), no new one")
