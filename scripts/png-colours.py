#!/usr/bin/env python3
"""Where colours appear in a PNG: for each colour given (#rrggbb), how many pixels are within 24 of
it on every channel, and the box that holds them, as one JSON object on standard output.

    python3 scripts/png-colours.py shot.png '#3b6fb6' '#d62728'
    {"#3b6fb6": {"pixels": 5120, "box": [x0, y0, x1, y1]}, "#d62728": {"pixels": 0, "box": null}}

The standard library only (zlib): 8-bit greyscale, RGB and RGBA, not interlaced, as headless
Chromium writes its screenshots. `haul load --report`'s test reads its page's screenshot with it.
"""
import json
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    position, chunks, header = 8, [], None
    while position < len(data):
        (length,) = struct.unpack(">I", data[position:position + 4])
        kind = data[position + 4:position + 8]
        body = data[position + 8:position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, colour_type, _, _, interlace = header
    channels = {0: 1, 2: 3, 6: 4, 4: 2}.get(colour_type)
    if depth != 8 or channels is None or interlace:
        sys.exit(f"{path}: depth {depth}, colour type {colour_type}, interlace {interlace}: not read here")
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    width, height, channels, rows = decode(sys.argv[1])
    wanted = {}
    for colour in sys.argv[2:]:
        value = colour.lstrip("#")
        wanted[colour] = tuple(int(value[i:i + 2], 16) for i in (0, 2, 4))
    found = {colour: {"pixels": 0, "box": None} for colour in wanted}
    for y, row in enumerate(rows):
        for x in range(width):
            pixel = row[x * channels:x * channels + 3] if channels >= 3 else bytes([row[x * channels]] * 3)
            for colour, (r, g, b) in wanted.items():
                if abs(pixel[0] - r) <= 24 and abs(pixel[1] - g) <= 24 and abs(pixel[2] - b) <= 24:
                    entry = found[colour]
                    entry["pixels"] += 1
                    box = entry["box"]
                    entry["box"] = [x, y, x, y] if box is None else [
                        min(box[0], x), min(box[1], y), max(box[2], x), max(box[3], y)]
    json.dump({"width": width, "height": height, "colours": found}, sys.stdout)
    print()


main()
