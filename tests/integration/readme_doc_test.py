#!/usr/bin/env python3
"""The README's commands do what it says: every command it shows is run or checked.

Usage: readme_doc_test.py SOURCE_DIR BUILD_DIR

Every fenced code block of README.md must follow a marker comment
`<!-- doc-test: MODE ... -->` (a block without one fails the test), MODE:

  ci      the set-up commands; .ci/run runs them on CI's clean machine, and
          tests/repo_checks/check_readme_commands.py checks that they are the
          same. Not run here (they build the tree this test runs from).
  run     each line runs, in README order, in one scratch folder, against a
          real kerncapd of this test's own (its store and sockets in the
          scratch folder, reached through $KERNCAP_SOCKET) with the synthetic
          agent as the application; each must exit 0. cap-7f3a and cap-91bc
          stand for the newest and the second newest captures of matmul.
  parse   commands that need a GPU, a remote node or an application: each line
          must parse (bash -n). kerncapctl / kerncap-replay lines are run with
          no daemon reachable ($KERNCAP_SOCKET names a missing socket, paths
          under /run/kerncap are moved into the scratch folder, files named by
          --code-object= are empty placeholders, contexts go to a scratch
          contexts file) and must not exit 2 (usage) or 126/127:
          their flags and values were accepted and they got as far as
          reaching a daemon or a GPU. `make -C DIR TARGETS` lines: each target
          must be one the reproducer's Makefile template defines. A library
          named by a VAR=PATH prefix must be built, or declared by a
          CMakeLists.txt when its toolkit is missing here (the CUDA agent).
  python  the block is Python; it must compile (it is not run: waiting for a
          capture needs an application).
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MARKER = re.compile(r"<!--\s*doc-test:\s*(\w+)")


def blocks(readme):
    """(line, mode, [command lines]) per fenced block; mode None: no marker."""
    out, lines = [], readme.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            mode = None
            j = i - 1
            while j >= 0 and not lines[j].strip():
                j -= 1
            m = MARKER.search(lines[j]) if j >= 0 else None
            if m:
                mode = m.group(1)
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            out.append((j + 2, mode, body))
        i += 1
    return out


def strip_comment(line):
    """The command without a trailing `# comment` (outside quotes)."""
    quote = None
    for k, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1] in " \t"):
            return line[:k].rstrip()
    return line.rstrip()


def commands(body):
    return [c for c in (strip_comment(l) for l in body) if c.strip()]


class Runner:
    def __init__(self, src, build):
        self.src, self.build = Path(src).resolve(), Path(build).resolve()
        self.tmp = Path(tempfile.mkdtemp(prefix="kc-readme-"))
        self.work = self.tmp / "work"
        self.work.mkdir()
        (self.work / "build").symlink_to(self.build)
        self.socket = str(self.tmp / "d" / "kerncapd.sock")
        self.agent_socket = str(self.tmp / "d" / "agent.sock")
        env = dict(os.environ)
        for k in ("KERNCAP_SOCKET", "KERNCAP_AGENT_SOCKET", "KERNCAP_CONFIG", "KERNCAP_REPLAY"):
            env.pop(k, None)
        env["PATH"] = f"{self.build}/bin:{env.get('PATH', '')}"
        env["HOME"] = str(self.tmp / "home")
        env["XDG_CONFIG_HOME"] = str(self.tmp / "config")
        env["XDG_RUNTIME_DIR"] = str(self.tmp / "run")
        env["XDG_DATA_HOME"] = str(self.tmp / "data")
        env["TMPDIR"] = str(self.tmp)
        self.base_env = env
        self.daemon = None
        self.failures = []
        self.ran = self.parsed = 0

    def start_daemon(self):
        log = open(self.tmp / "kerncapd.log", "w")
        self.daemon = subprocess.Popen(
            [f"{self.build}/bin/kerncapd", f"--store={self.tmp}/store", f"--socket={self.socket}",
             f"--agent-socket={self.agent_socket}", "--drain-timeout=5"],
            stdout=log, stderr=subprocess.STDOUT, env=self.base_env)
        for _ in range(200):
            if os.path.exists(self.socket):
                r = subprocess.run([f"{self.build}/bin/kerncapctl", f"--socket={self.socket}",
                                    "status", "-q"], env=self.base_env, capture_output=True)
                if r.returncode == 0:
                    return
            time.sleep(0.05)
        raise SystemExit("readme_doc_test: kerncapd did not start; log: "
                         + (self.tmp / "kerncapd.log").read_text())

    def stop(self):
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.daemon.kill()

    def run_env(self):
        env = dict(self.base_env)
        env["KERNCAP_SOCKET"] = self.socket
        env["KERNCAP_AGENT_SOCKET"] = self.agent_socket
        return env

    def matmul_captures(self):
        r = subprocess.run([f"{self.build}/bin/kerncapctl", "captures", "--kernel=matmul", "-q"],
                           env=self.run_env(), capture_output=True, text=True)
        return r.stdout.split()

    def placeholders(self, cmd):
        if "cap-7f3a" not in cmd and "cap-91bc" not in cmd:
            return cmd
        ids = self.matmul_captures()
        if not ids or ("cap-91bc" in cmd and len(ids) < 2):
            self.failures.append(f"{cmd!r}: the README's loop left {len(ids)} matmul capture(s)")
            return None
        cmd = cmd.replace("cap-7f3a", ids[0])
        return cmd.replace("cap-91bc", ids[1]) if len(ids) > 1 else cmd

    def sh(self, cmd, env, timeout=300):
        return subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=self.work, env=env,
                              capture_output=True, text=True, timeout=timeout)

    def run_block(self, line, body):
        for cmd in commands(body):
            real = self.placeholders(cmd)
            if real is None:
                continue
            r = self.sh(real, self.run_env())
            self.ran += 1
            print(f"[run   rc={r.returncode}] {cmd}")
            if r.returncode != 0:
                self.failures.append(f"README.md:{line}: `{cmd}` exited {r.returncode}:\n"
                                     f"{r.stdout[-2000:]}{r.stderr[-2000:]}")

    def parse_env(self):
        env = dict(self.base_env)
        env["KERNCAP_SOCKET"] = str(self.tmp / "no-daemon" / "kerncapd.sock")
        env["KERNCAP_CONFIG"] = str(self.tmp / "parse-config.toml")
        env["KERNCAP_REPLAY"] = str(self.build / "bin" / "kerncap-replay")
        if not os.access(env["KERNCAP_REPLAY"], os.X_OK):
            env.pop("KERNCAP_REPLAY")
        return env

    def parse_block(self, line, body):
        targets = set(re.findall(r"^([a-z][a-z-]*):", (self.src / "reproducer/generator/templates/"
                                                      "Makefile.in").read_text(), re.M))
        for cmd in commands(body):
            self.parsed += 1
            r = subprocess.run(["bash", "-n", "-c", cmd], capture_output=True, text=True)
            if r.returncode != 0:
                self.failures.append(f"README.md:{line}: `{cmd}` does not parse: {r.stderr}")
                continue
            words = shlex.split(cmd)
            # VAR=PATH prefixes that name a library the build makes.
            while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
                value = words.pop(0).split("=", 1)[1]
                if value.endswith(".so"):
                    self.check_library(line, cmd, Path(value).name)
            if not words:
                continue
            tool = words[0]
            if tool == "make":
                args = words[1:]
                if args[:1] == ["-C"]:
                    args = args[2:]
                missing = [t for t in args if t not in targets]
                if missing:
                    self.failures.append(f"README.md:{line}: `{cmd}`: no target(s) {missing} in "
                                         "the reproducer's Makefile template")
                print(f"[parse make targets ok] {cmd}")
                continue
            if tool not in ("kerncapctl", "kerncap-replay"):
                print(f"[parse bash -n ok] {cmd}")
                continue
            moved = cmd.replace("/run/kerncap/", f"{self.tmp}/run-system/")
            # Files a GPU node would have built (--code-object=...) exist here
            # as empty placeholders, so that the check reaches the daemon.
            for f in re.findall(r"--code-object=(\S+)", cmd):
                placeholder = self.work / f
                if not placeholder.exists():
                    placeholder.parent.mkdir(parents=True, exist_ok=True)
                    placeholder.write_bytes(b"")
            r = self.sh(moved + " </dev/null", self.parse_env(), timeout=60)
            print(f"[parse rc={r.returncode}] {cmd}")
            if r.returncode in (2, 126, 127):
                self.failures.append(f"README.md:{line}: `{cmd}` was refused as a command line "
                                     f"(exit {r.returncode}): {r.stderr.strip()[-1000:]}")

    def check_library(self, line, cmd, name):
        if (self.build / "lib" / name).exists():
            return
        stem = name[len("lib"):-len(".so")] if name.startswith("lib") else name
        declared = any(stem in p.read_text() for p in self.src.glob("agent/**/CMakeLists.txt"))
        if not declared:
            self.failures.append(f"README.md:{line}: `{cmd}` names {name}, which the build "
                                 "neither made nor declares")
        else:
            print(f"    ({name} is not built here: its toolkit is missing; CMake declares it)")

    def python_block(self, line, body):
        try:
            compile("\n".join(body), f"README.md:{line}", "exec")
        except SyntaxError as e:
            self.failures.append(f"README.md:{line}: the Python block does not compile: {e}")
        print(f"[python compiles] README.md:{line}")


def main(src, build):
    readme = (Path(src) / "README.md").read_text()
    found = blocks(readme)
    r = Runner(src, build)
    try:
        r.start_daemon()
        for line, mode, body in found:
            if mode is None:
                r.failures.append(f"README.md:{line}: a code block without a <!-- doc-test: ... --> "
                                  "marker (ci, run, parse or python)")
            elif mode == "ci":
                print(f"[ci: run by .ci/run, checked by check_readme_commands.py] "
                      + "; ".join(commands(body)))
            elif mode == "run":
                r.run_block(line, body)
            elif mode == "parse":
                r.parse_block(line, body)
            elif mode == "python":
                r.python_block(line, body)
            else:
                r.failures.append(f"README.md:{line}: unknown doc-test mode {mode!r}")
    finally:
        r.stop()
    for f in r.failures:
        print("FAIL:", f)
    print(f"readme_doc_test: {r.ran} commands run against kerncapd, {r.parsed} checked as "
          f"command lines, {len(r.failures)} failures")
    if not r.failures:
        shutil.rmtree(r.tmp, ignore_errors=True)
    else:
        print(f"scratch folder kept: {r.tmp}")
    return 1 if r.failures or r.ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
