#!/usr/bin/env python3
"""Renames the msgpack key .kernarg_segment_size in a code object's metadata
note to a same-length unknown key, producing a Tensile-style code object
whose metadata lacks the kernarg segment size. Usage: IN OUT"""
import sys

data = open(sys.argv[1], "rb").read()
key = b"\xb5.kernarg_segment_size"  # fixstr of length 21
assert len(key) == 22
n = data.count(key)
if n == 0:
    sys.exit("no .kernarg_segment_size key found")
open(sys.argv[2], "wb").write(data.replace(key, b"\xb5.kernarg_segment_xxxx"))
