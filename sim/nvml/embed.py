#!/usr/bin/python3
"""Turn a file into a C byte array: embed.py <input> <output.c> <symbol>."""
import sys

src, out, sym = sys.argv[1:4]
data = open(src, "rb").read()
with open(out, "w") as f:
    f.write("#include <stddef.h>\n\n")
    f.write(f"const unsigned char {sym}[] = {{\n")
    for i in range(0, len(data), 16):
        f.write("    " + ", ".join(str(b) for b in data[i:i + 16]) + ",\n")
    f.write("    0,\n};\n")
    f.write(f"const size_t {sym}_len = {len(data)};\n")
