#!/usr/bin/env python3
"""Help texts and docs/EXIT_CODES.md agree on the exit codes.

Usage: check_exit_codes.py REPO_ROOT BIN_DIR

The table is defined once (common/exit_codes.h); this checks every place a
user reads it:
  - docs/EXIT_CODES.md's table has the same codes and names as
    `kerncapctl help exit-codes -o json` (printed from the C++ table);
  - `kerncap-replay --help` lists every code with its name;
  - in the help of kerncapctl (every command), kerncapd and kerncap-replay
    (every subcommand), every "Exit codes" passage names only codes of the
    table, and a code written next to one of the table's names ("3
    not_found") is that name's code.
"""
import json
import re
import subprocess
import sys
from pathlib import Path


def run(*argv):
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    return r.stdout + r.stderr


def exit_passages(text):
    """The text after each "Exit code(s)" up to a blank line."""
    out = []
    for m in re.finditer(r"[Ee]xit codes?\b", text):
        rest = text[m.end():]
        end = rest.find("\n\n")
        out.append(rest if end < 0 else rest[:end])
    return out


def main(root, bindir):
    root, bindir = Path(root), Path(bindir)
    errors = []
    doc = (root / "docs" / "EXIT_CODES.md").read_text()
    doc_table = {int(c): n for c, n in re.findall(r"^\| (\d+) \| `([a-z_]+)` \|", doc, re.M)}
    ctl = str(bindir / "kerncapctl")
    table = {e["code"]: e["name"] for e in json.loads(run(ctl, "help", "exit-codes", "-o", "json"))}
    if doc_table != table:
        errors.append(f"docs/EXIT_CODES.md has {doc_table}, kerncapctl help exit-codes {table}")
    names = {n: c for c, n in table.items()}

    helps = {"kerncapctl --help": run(ctl, "--help"),
             "kerncapctl help exit-codes": run(ctl, "help", "exit-codes"),
             "kerncapd --help": run(str(bindir / "kerncapd"), "--help")}
    commands = re.findall(r"^  ([a-z][a-z-]+) ", helps["kerncapctl --help"], re.M)
    for c in commands:
        helps[f"kerncapctl {c} --help"] = run(ctl, c, "--help")
    replay = bindir / "kerncap-replay"
    if replay.exists():
        top = run(str(replay), "--help")
        helps["kerncap-replay --help"] = top
        for c, n in table.items():
            if not re.search(rf"\b{c} {n}\b", top):
                errors.append(f"kerncap-replay --help does not list exit code {c} {n}")
        for sub in ("run", "validate", "bench", "serve", "submit", "profile"):
            helps[f"kerncap-replay {sub} --help"] = run(str(replay), sub, "--help")
    else:
        print("check_exit_codes: kerncap-replay is not built; its help is not checked")

    for where, text in helps.items():
        for passage in exit_passages(text):
            for code, word in re.findall(r"\b(\d+) ([a-z_]+)", passage):
                code = int(code)
                if code not in table:
                    errors.append(f"{where}: exit code {code} is not in the table")
                elif word in names and names[word] != code:
                    errors.append(f"{where}: says {code} {word}, the table says "
                                  f"{names[word]} {word} and {code} {table[code]}")
    for e in errors:
        print("check_exit_codes:", e)
    if not errors:
        print(f"check_exit_codes: OK ({len(helps)} help texts agree with docs/EXIT_CODES.md)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
