#!/usr/bin/env python3
"""Counts the distinct colours of a PNG (8-bit RGB or RGBA, as Chromium
writes screenshots) with the standard library only, and fails when there are
fewer than --min: a blank or unstyled page has one or two."""
import struct
import sys
import zlib


def pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise SystemExit(f"{path}: only 8-bit RGB/RGBA, non-interlaced PNGs are read (got depth {depth} type {ctype})")
    bpp = 3 if ctype == 2 else 4
    raw, stride, prev, out = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.append(bytes(line))
        prev = line
    return w, h, bpp, out


def main():
    path = sys.argv[1]
    need = int(sys.argv[sys.argv.index("--min") + 1]) if "--min" in sys.argv else 2
    w, h, bpp, rows = pixels(path)
    colours = set()
    for r in rows:
        for x in range(0, len(r), bpp * 2):  # every other pixel is plenty
            colours.add(r[x:x + 3])
    print(f"{path}: {w}x{h}, {len(colours)} distinct colours")
    if len(colours) < need:
        raise SystemExit(f"{path}: looks blank ({len(colours)} colours, expected at least {need})")


if __name__ == "__main__":
    main()
