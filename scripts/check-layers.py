#!/usr/bin/env python3
"""Fails when a folder of Sources/Haul refers to a type declared in a folder above it, when a file
outside Sources/Haul/Transfer names a stored property of Transfer, or when a source file under
Sources/ or Examples/ is over 400 lines.

ARCHITECTURE.md's rule: layers point one way, a folder uses the ones below it. The order, top to
bottom, is LAYERS; the root of Sources/Haul is the facade, on top. A type's folder is where it is
declared (an extension elsewhere does not move it). References are found by name in the code, with
comments and string literals left out. Known references that still point up are listed in
scripts/layers-allowed.txt (one "folder -> type" a line); an unlisted one fails, and so does a
listed one that is gone (the list only shrinks).
"""
import os, re, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SOURCES = os.path.join(ROOT, "Sources", "Haul")
LAYERS = ["(root)", "Queue", "Scheduler", "Catalog", "Transfer", "Download", "Disk", "Journal", "Reactor", "Metrics", "Values", "Support"]
DECLARATION = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private|final|indirect)\s+)*(?:class|struct|enum|actor|protocol|typealias)\s+([A-Z]\w*)", re.M)

def folder_of(path):
    relative = os.path.relpath(path, SOURCES)
    parts = relative.split(os.sep)
    return parts[0] if len(parts) > 1 else "(root)"

def code_only(text):
    # Block comments, line comments and string literals (single-line and multi-line) out.
    text = re.sub(r'"""[\s\S]*?"""', '""', text)
    text = re.sub(r"/\*[\s\S]*?\*/", " ", text)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"//[^\n]*", " ", text)
    return text

files = []
for directory, _, names in os.walk(SOURCES):
    for name in names:
        if name.endswith(".swift"):
            files.append(os.path.join(directory, name))

declared = {}
for path in files:
    folder = folder_of(path)
    if folder not in LAYERS:
        sys.exit(f"check-layers: {folder} is not in LAYERS; place it in ARCHITECTURE.md's order")
    for name in DECLARATION.findall(code_only(open(path).read())):
        # Nested types share names across files (State, Mode): only top-level ones count.
        declared.setdefault(name, set()).add(folder)

top_level = {}
for path in files:
    folder = folder_of(path)
    for match in re.finditer(r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private|final|indirect)\s+)*(?:class|struct|enum|actor|protocol|typealias)\s+([A-Z]\w*)", code_only(open(path).read()), re.M):
        top_level[match.group(1)] = folder

found = set()
for path in files:
    folder = folder_of(path)
    rank = LAYERS.index(folder)
    for name in set(re.findall(r"\b([A-Z]\w*)\b", code_only(open(path).read()))):
        owner = top_level.get(name)
        if owner is not None and LAYERS.index(owner) < rank:
            found.add((folder, name, owner))

allowed_path = os.path.join(ROOT, "scripts", "layers-allowed.txt")
allowed = set()
if os.path.exists(allowed_path):
    for line in open(allowed_path):
        line = line.split("#", 1)[0].strip()
        if line:
            source, name = [part.strip() for part in line.split("->")]
            allowed.add((source, name))

failures = []
for folder, name, owner in sorted(found):
    if (folder, name) not in allowed:
        failures.append(f"  {folder} -> {name} (declared in {owner}, above it)")
for folder, name in sorted(allowed - {(f, n) for f, n, _ in found}):
    failures.append(f"  {folder} -> {name} is listed in scripts/layers-allowed.txt but no longer used: remove the line")
# Transfer's stored properties are its own (issue 40): Swift's `private` ends at a file and a
# transfer's code spans the files of Sources/Haul/Transfer, so this keeps it. Outside that folder, no
# stored property of Transfer (a `let` or `var` of its body that is not computed) is named on a
# transfer: a value whose name ends in "transfer" or "waiter", or a key path on a line about transfers.
transfer_file = os.path.join(SOURCES, "Transfer", "Transfer.swift")
body = code_only(open(transfer_file).read())
body = body[body.index("final class Transfer {"):]
stored, depth = set(), 0
for line in body.split("\n"):
    if depth == 1:
        match = re.match(r"\s*(?:private\s+|fileprivate\s+)?(?:let|var)\s+(\w+)", line)
        if match and "{" not in line:
            stored.add(match.group(1))
    opened = depth
    depth += line.count("{") - line.count("}")
    if opened > 0 and depth == 0:
        break
if len(stored) < 10:
    sys.exit(f"check-layers: found only {sorted(stored)} as Transfer's stored properties; the parser needs a look")
for path in sorted(files):
    if os.path.relpath(path, SOURCES).startswith("Transfer" + os.sep):
        continue
    for number, line in enumerate(code_only(open(path).read()).split("\n"), 1):
        for match in re.finditer(r"(\b\w*(?:[tT]ransfer|[wW]aiter)|\\)\.(\w+)\b", line):
            if match.group(1) == "\\" and "ransfer" not in line:
                continue  # a key path, on something else than transfers
            if match.group(2) in stored:
                failures.append(f"  {os.path.relpath(path, ROOT)}:{number}: names Transfer's stored property '{match.group(2)}' (ask the transfer: Transfer+Owner.swift)")

# No source file over 400 lines (issue 40): under Sources/ and Examples/, dependencies' checkouts aside.
LONGEST = 400
longest = 0
for top in ("Sources", "Examples"):
    for directory, folders, names in os.walk(os.path.join(ROOT, top)):
        folders[:] = [f for f in folders if not f.startswith(".build")]
        for name in names:
            if name.endswith(".swift"):
                path = os.path.join(directory, name)
                lines = sum(1 for _ in open(path))
                longest = max(longest, lines)
                if lines > LONGEST:
                    failures.append(f"  {os.path.relpath(path, ROOT)}: {lines} lines, over the house's {LONGEST}: split it")

if failures:
    print("check-layers: ARCHITECTURE.md's rules are broken (layers point down, a transfer's properties are its own, files stay under 400 lines):")
    print("\n".join(failures))
    sys.exit(1)
print(f"check-layers: {len(found)} known references point up (scripts/layers-allowed.txt), no new one; {len(stored)} stored properties of Transfer named only in its own files; the longest source file has {longest} lines")
