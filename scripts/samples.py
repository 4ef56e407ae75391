#!/usr/bin/env python3
"""Extracts every ```swift block of README.md and of the DocC articles into Swift files that
Examples/samples builds, so that a sample that does not compile fails the test command.

    python3 scripts/samples.py REPOSITORY OUTPUT_FOLDER

A block that begins with imports is a file: it gets exactly those imports (`import Haul` alone
does not give `URL`: the sample must say `import Foundation`, as a user's file must). A block
without imports is a fragment of such a file: it gets Foundation and Haul. Each block becomes the
body of a function of its own, so that the names a sample takes as given (`manager`, `download`,
`url`…, in Examples/samples/Sources/Samples/Given.swift) are there; `#sourceLocation` makes the
compiler's errors name the Markdown file and line. A line of a package manifest (`.package(...)`)
is not code of a target: it is left out, and said.
"""
import glob
import os
import re
import sys

root, output = sys.argv[1], sys.argv[2]
documents = ["README.md"] + sorted(
    os.path.relpath(path, root) for path in glob.glob(os.path.join(root, "Sources/*/*.docc/*.md"))
)
os.makedirs(output, exist_ok=True)
for stale in glob.glob(os.path.join(output, "*.swift")):
    os.remove(stale)

fence = re.compile(r"^```swift\s*$")
written, manifests = 0, []
for document in documents:
    lines = open(os.path.join(root, document), encoding="utf-8").read().split("\n")
    index, number = 0, 0
    while index < len(lines):
        if not fence.match(lines[index]):
            index += 1
            continue
        first = index + 2  # the Markdown line (from 1) of the block's first line
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        block = lines[index + 1 : end]
        index = end + 1
        number += 1
        code = [line for line in block if line.strip()]
        if code and code[0].lstrip().startswith(".package("):
            manifests.append(f"{document}:{first}")
            continue
        imports = [line.strip() for line in block if line.strip().startswith("import ")]
        if not (code and code[0].strip().startswith("import ")):
            imports = ["import Foundation", "import Haul"] + imports
        body = ["" if line.strip().startswith("import ") else line for line in block]
        name = re.sub(r"[^A-Za-z0-9]", "_", os.path.splitext(os.path.basename(document))[0])
        function = f"sample_{name}_{number}"
        # Written as the Markdown shows it, not as swift-format would: the lint leaves it alone.
        text = f"// swift-format-ignore-file\n// {document}:{first}, extracted by scripts/samples.py\n"
        text += "\n".join(sorted(set(imports)))
        text += f"\n\nfunc {function}() async throws {{\n"
        text += f'#sourceLocation(file: "{document}", line: {first})\n'
        text += "\n".join(body)
        text += "\n#sourceLocation()\n}\n"
        with open(os.path.join(output, f"{name}_{number}.swift"), "w", encoding="utf-8") as file:
            file.write(text)
        written += 1

if written == 0:
    sys.exit("no ```swift block found: the samples check would check nothing")
print(f"{written} samples extracted" + (f"; manifest lines left out: {', '.join(manifests)}" if manifests else ""))
