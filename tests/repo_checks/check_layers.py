#!/usr/bin/env python3
"""Enforces the dependency rule between the top-level folders (docs/ARCHITECTURE.md): a file may include only from its own folder and from folders
below it, and nothing outside daemon/ includes from daemon/.

Layers, bottom to top (a folder may include from any lower layer):
  0  common/  proto/          shared utilities, byte formats, the API's messages
  1  format/                  the capture format (.kcap, store reader, manifest checks)
  2  agent/  reproducer/      the in-process agent; replay and reproducer generation
                              (peers: neither includes the other)
  3  daemon/                  kerncapd (internal: nobody else includes it)
  4  client/                  kerncapctl, the Python client
tests/, python_shim/ and deploy/ are not part of the layering (tests may include
anything). Test files (*_test.cc, *_test_util.h, *_fuzzer.cc, testing/ folders)
follow the same rule as the folder they are in.

Usage: check_layers.py [REPO_ROOT]   exit 0 when clean, 1 with a list of violations.
"""
import os
import re
import sys

LAYERS = {"common": 0, "proto": 0, "format": 1, "agent": 2, "reproducer": 2, "daemon": 3,
          "client": 4}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCES = (".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh", ".c")


def violations(root):
    out = []
    for top in sorted(LAYERS):
        base = os.path.join(root, top)
        for d, _, files in os.walk(base):
            for f in sorted(files):
                if not f.endswith(SOURCES):
                    continue
                path = os.path.join(d, f)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1).split("/", 1)[0]
                        if target not in LAYERS or target == top:
                            continue
                        if target == "daemon":
                            out.append("%s:%d includes %s: nothing outside daemon/ includes "
                                       "from daemon/" % (rel, n, m.group(1)))
                        elif LAYERS[target] >= LAYERS[top]:
                            out.append("%s:%d includes %s: %s/ (layer %d) may not include "
                                       "from %s/ (layer %d): only from lower layers" % (rel, n, m.group(1), top,
                                                                 LAYERS[top], target,
                                                                 LAYERS[target]))
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    bad = violations(os.path.abspath(root))
    for v in bad:
        print(v)
    print("check_layers: %d violation(s)" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
