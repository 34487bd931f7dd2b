#!/usr/bin/env python3
"""Embed a JSON document in the weir binary as a C array, so what the server
serves is the repository's file. Usage: embed.py INPUT OUTPUT SYMBOL.
The document must parse: a broken file fails the build, not a client."""
import json
import sys

src, out, sym = sys.argv[1:4]
data = open(src, "rb").read()
json.loads(data)
with open(out, "w") as f:
    f.write("/* Generated from %s by embed.py: do not edit. */\n#include <stddef.h>\n\n" % src)
    f.write("const char %s[] = {\n" % sym)
    for i in range(0, len(data), 16):
        f.write("\t" + ", ".join("0x%02x" % b for b in data[i:i + 16]) + ",\n")
    f.write("\t0x00\n};\nconst size_t %s_len = %d;\n" % (sym, len(data)))
