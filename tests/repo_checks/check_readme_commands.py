#!/usr/bin/env python3
"""The README's set-up commands are what CI runs, and the front page stays one.

Usage: check_readme_commands.py REPO_ROOT

Checks (each failure is named; exit 1 on any):
  - the README's first two commands (the first lines of its first code
    blocks that are not comments) are exactly `bash deploy/quickstart.sh`
    and `bash tests/run_tests.sh`, in that order;
  - .ci/run runs exactly those two commands, in that order, and no other
    `bash` command (a new user's first hour is what CI checks);
  - the README has at most 2000 words and no table cell over 400 characters
    (issue 30: details go to docs/, the front page stays readable).
"""
import re
import sys
from pathlib import Path

SETUP = ["bash deploy/quickstart.sh", "bash tests/run_tests.sh"]
MAX_WORDS = 2000
MAX_CELL = 400


def code_blocks(text):
    """(first line number, [lines]) of each fenced block."""
    blocks, cur, start = [], None, 0
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if cur is None:
                cur, start = [], n
            else:
                blocks.append((start, cur))
                cur = None
        elif cur is not None:
            cur.append(line)
    return blocks


def commands(lines):
    out = []
    for line in lines:
        s = line.strip()
        if s and not s.startswith("#"):
            out.append(re.sub(r"\s+#.*$", "", s))
    return out


def main(root):
    root = Path(root)
    readme = (root / "README.md").read_text()
    errors = []
    first = []
    for _, lines in code_blocks(readme):
        first += commands(lines)
        if len(first) >= 2:
            break
    if first[:2] != SETUP:
        errors.append(f"README's first two commands are {first[:2]}, not {SETUP}")
    ci = (root / ".ci" / "run").read_text()
    ci_cmds = [c for c in commands(ci.splitlines()) if c.startswith("bash ")]
    if ci_cmds != SETUP:
        errors.append(f".ci/run runs {ci_cmds}, not the README's set-up commands {SETUP} in order")
    words = len(readme.split())
    if words > MAX_WORDS:
        errors.append(f"README.md has {words} words (at most {MAX_WORDS}: details go to docs/)")
    for n, line in enumerate(readme.splitlines(), 1):
        if line.startswith("|"):
            for cell in re.split(r"(?<!\\)\|", line.strip().strip("|")):
                if len(cell.strip()) > MAX_CELL:
                    errors.append(f"README.md:{n}: a table cell of {len(cell.strip())} characters "
                                  f"(at most {MAX_CELL})")
    for e in errors:
        print("check_readme_commands:", e)
    if not errors:
        print(f"check_readme_commands: OK (set-up commands {SETUP}; {words} words)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
