#!/usr/bin/env python3
"""Fails when a folder of a layer's target refers to a type declared in a folder above it in the same
target, when a source file under Sources/ or Examples/ is over 400 lines, or when a function,
initialiser or closure-free accessor under Sources/ is over 80 lines (issue 76).

ARCHITECTURE.md's rule: layers point one way. Between the library's targets (Haul, HaulScheduler,
HaulTransfer, HaulIO, HaulValues: Package.swift's `layers`) the compiler keeps it: a target imports only the ones
below it, and what a layer does not mark `package` is its own (Transfer's stored properties among
them). Within a target its folders keep an order too, top to bottom in TARGETS, which this script
checks; a target's root is on top of its folders. A type's folder is where it is declared (an
extension elsewhere does not move it). References are found by name in the code, with comments and
string literals left out. Known references that still point up are listed in
scripts/layers-allowed.txt (one "folder -> type" a line); an unlisted one fails, and so does a
listed one that is gone (the list only shrinks).
"""
import os, re, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# Package.swift's `layers`: each target's folders, top to bottom.
package_swift = open(os.path.join(ROOT, "Package.swift")).read()
TARGETS = {
    target: re.findall(r'"(\w+)"', folders)
    for target, folders in re.findall(r'\("(\w+)", \[([^\]]*)\]\)', package_swift[package_swift.index("let layers"):])
}
if set(TARGETS) != {"Haul", "HaulScheduler", "HaulTransfer", "HaulIO", "HaulValues"}:
    sys.exit(f"check-layers: read {sorted(TARGETS)} from Package.swift's layers; the parser needs a look")
DECLARATION = re.compile(r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private|final|indirect)\s+)*(?:class|struct|enum|actor|protocol|typealias)\s+([A-Z]\w*)", re.M)

def code_only(text):
    # Block comments, line comments and string literals (single-line and multi-line) out.
    text = re.sub(r'"""[\s\S]*?"""', '""', text)
    text = re.sub(r"/\*[\s\S]*?\*/", " ", text)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"//[^\n]*", " ", text)
    return text

found = set()
for target, folders in TARGETS.items():
    sources = os.path.join(ROOT, "Sources", target)
    layers = ["(root)"] + folders
    files = []
    for directory, _, names in os.walk(sources):
        for name in names:
            if name.endswith(".swift"):
                files.append(os.path.join(directory, name))

    def folder_of(path):
        parts = os.path.relpath(path, sources).split(os.sep)
        return parts[0] if len(parts) > 1 else "(root)"

    top_level = {}
    for path in files:
        folder = folder_of(path)
        if folder not in layers:
            sys.exit(f"check-layers: {target}/{folder} is not in TARGETS; place it in ARCHITECTURE.md's order")
        for name in DECLARATION.findall(code_only(open(path).read())):
            top_level[name] = folder
    for path in files:
        folder = folder_of(path)
        rank = layers.index(folder)
        for name in set(re.findall(r"\b([A-Z]\w*)\b", code_only(open(path).read()))):
            owner = top_level.get(name)
            if owner is not None and layers.index(owner) < rank:
                found.add((f"{target}/{folder}", name, f"{target}/{owner}"))

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

# No function over 80 lines under Sources/ (issue 76): from the line that declares it to the brace
# that closes its body, counted on the code with comments and string literals out.
LONGEST_FUNCTION = 80
FUNCTION = re.compile(
    r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private|static|class|final|override|"
    r"mutating|nonmutating|nonisolated|convenience|required)\s+)*(?:func\s+([^\s(<]+)|(init)[?!]?\s*[(<]|(deinit)\b)"
)
longest_function = (0, "")
for directory, folders, names in os.walk(os.path.join(ROOT, "Sources")):
    for name in names:
        if not name.endswith(".swift"):
            continue
        path = os.path.join(directory, name)
        lines = code_only(open(path).read()).split("\n")
        for index, line in enumerate(lines):
            match = FUNCTION.match(line)
            if not match:
                continue
            depth, opened, end = 0, False, index
            while end < len(lines):
                depth += lines[end].count("{") - lines[end].count("}")
                opened = opened or "{" in lines[end]
                if opened and depth <= 0:
                    break
                end += 1
            if not opened:
                continue  # a requirement without a body
            length = end - index + 1
            where = f"{os.path.relpath(path, ROOT)}:{index + 1} {next(g for g in match.groups() if g)}"
            longest_function = max(longest_function, (length, where))
            if length > LONGEST_FUNCTION:
                failures.append(f"  {where}: {length} lines, over the house's {LONGEST_FUNCTION}: split it")

if failures:
    print("check-layers: ARCHITECTURE.md's rules are broken (a target's folders point down, files stay under 400 lines, functions under 80):")
    print("\n".join(failures))
    sys.exit(1)
print(f"check-layers: {len(found)} known references point up within a target (scripts/layers-allowed.txt), no new one; the longest source file has {longest} lines, the longest function {longest_function[0]} ({longest_function[1]})")
