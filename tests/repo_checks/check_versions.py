#!/usr/bin/env python3
"""The version is written once, in project(kerncap VERSION ...) of the top-level
CMakeLists.txt: C++ code reads it from the generated common/version.h. The Python
packages cannot read CMake, so this check makes sure they say the same, and that
no C++ source writes a version literal of its own.

Usage: check_versions.py REPO_ROOT VERSION    exit 0 when consistent, 1 otherwise.
"""
import os
import re
import sys

PYTHON_PLACES = [
    ("client/python/pyproject.toml", r'^version\s*=\s*"([^"]+)"'),
    ("client/python/src/kerncap/__init__.py", r'^__version__\s*=\s*"([^"]+)"'),
    ("python_shim/pyproject.toml", r'^version\s*=\s*"([^"]+)"'),
    ("python_shim/src/kerncap_shim/__init__.py", r'^__version__\s*=\s*"([^"]+)"'),
]
CXX_DIRS = ["agent", "client", "common", "daemon", "reproducer"]


def main():
    root, version = sys.argv[1], sys.argv[2]
    problems = []
    for rel, pattern in PYTHON_PLACES:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            m = re.search(pattern, f.read(), re.MULTILINE)
        if not m:
            problems.append("%s: no version found" % rel)
        elif m.group(1) != version:
            problems.append("%s says %s, CMakeLists.txt says %s" % (rel, m.group(1), version))
    for top in CXX_DIRS:
        for d, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith((".cc", ".h", ".cu")) or name.endswith("_test.cc"):
                    continue
                path = os.path.join(d, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        # The project's version quoted in code (not in a comment)
                        # is a second copy of it.
                        code = line.split("//", 1)[0]
                        if '"%s"' % version in code:
                            problems.append("%s:%d writes a version literal (use common/version.h)"
                                            % (os.path.relpath(path, root), n))
    for p in problems:
        print(p)
    print("check_versions: %d problem(s) (version %s)" % (len(problems), version))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
