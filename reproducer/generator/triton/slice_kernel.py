"""slice_kernel.py: cuts a Triton kernel, and what it needs, out of its module
and out of the application's other modules it imports helpers from.

Embedded in the reproducer generator (triton_project.cc) and run by it as
``python3 -I -c <this file> MODULE_FILE FUNCTION_NAME [OPTIONS_JSON]``. It
only parses files (``ast``): nothing of the application is imported or
executed. OPTIONS_JSON (optional) is an object:

  module   the kernel module's import name ("some_pkg.ops.kernels"; from the
           shim's functions{}.module): resolves its relative imports and the
           folder its package lives in
  roots    folders to resolve absolute imports in (the application's
           sys.path, recorded by the shim), after the kernel package's own

Prints one JSON object on stdout:

  ok                 true, or false with "error"
  pieces[]           the top-level statements to keep, in file order:
                     {kind: "future"|"import"|"statement"|"function"|"target",
                      names: [names it binds], line (of the statement, the
                      def for functions), start_line (original line of the
                      text's first line), text}
                     "target" is the kernel: its text has only the @triton.jit
                     decorator(s) left (autotune, heuristics and Inductor's
                     triton_heuristics.* decorators removed: the reproducer
                     pins the configuration). Relative imports are rewritten
                     as absolute ones (kernel.py is a top-level module).
  target             {name, line (of the def), def_text (from "def", as
                      Triton's JITFunction.src holds it), def_sha256,
                      decorators_kept[], decorators_removed[]}
  dropped_imports[]  top-level imports nothing kept refers to
  modules[]          the application modules helpers come from, sliced the
                     same way, for the project's deps/ folder: {module, file,
                     package (an __init__.py), pieces[], names[] (what was
                     asked of it), dropped_imports[]}
  not_copied[]       imports of the application that could not be copied
                     ({module, names, why}: not found, a compiled extension,
                     a module used as a value): kernel.py keeps the import,
                     so the package must be installed where run.py runs
  inductor           for a kernel with an Inductor decorator
                     (@triton_heuristics.pointwise(...), ...): {decorator,
                     triton_meta, inductor_meta} with the keys whose values are
                     literals
  python             the interpreter's version

What is kept of a module: the kernel (or the names asked of it); every
top-level statement binding a name the kept code refers to (other
@triton.jit functions, constants, imports, try/if blocks that define names),
transitively; `from __future__` imports; imports of triton and
torch._inductor modules. Never the `if __name__ == "__main__":` block,
expression statements, or anything else. Imports of the standard library,
triton, torch and numpy stay imports; every other import a kept statement
needs is resolved to its source file and sliced for the names used.
"""
import ast
import hashlib
import json
import os
import re
import sys
import sysconfig
import textwrap

JIT_NAMES = ("jit",)
ALWAYS_KEEP_MODULES = ("triton", "torch._inductor")
# Imports left as imports: the environment run.py needs anyway.
ENVIRONMENT_PACKAGES = ("triton", "torch", "numpy", "__future__")
INDUCTOR_KINDS = ("pointwise", "reduction", "persistent_reduction", "cooperative_reduction",
                  "split_scan", "template", "user_autotune", "foreach", "fixed_config")
MAX_MODULES = 64


def dotted(node):
    """'triton.jit' for an Attribute/Name chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def decorator_name(dec):
    return dotted(dec.func if isinstance(dec, ast.Call) else dec)


def is_jit_decorator(dec):
    name = decorator_name(dec)
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1]
    return last in JIT_NAMES and (name == last or name.startswith("triton") or name.startswith("tl."))


def is_main_guard(node):
    if not isinstance(node, ast.If):
        return False
    t = node.test
    if isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == "__name__":
        for c in t.comparators:
            if isinstance(c, ast.Constant) and c.value == "__main__":
                return True
    return False


def bound_names(node):
    """Names a top-level statement binds (recursing into if/try/with blocks)."""
    out = set()
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for a in node.names:
            if a.name == "*":
                continue
            out.add(a.asname or a.name.split(".")[0])
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out.add(node.name)
    elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    out.add(n.id)
    elif isinstance(node, (ast.If, ast.Try, ast.With)) or type(node).__name__ == "TryStar":
        for field in ("body", "orelse", "finalbody"):
            for child in getattr(node, field, []) or []:
                out |= bound_names(child)
        for h in getattr(node, "handlers", []) or []:
            for child in h.body:
                out |= bound_names(child)
    return out


def referenced_names(nodes):
    out = set()
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                out.add(n.id)
    return out


def attribute_chains(nodes):
    """Every dotted chain ("U.helper", "pkg.mod.f") used in `nodes`."""
    out = set()
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute):
                d = dotted(n)
                if d:
                    out.add(d)
    return out


def segment(lines, node, start_line=None):
    start = (start_line or node.lineno) - 1
    return "".join(lines[start:node.end_lineno])


def function_start(node):
    return min([node.lineno] + [d.lineno for d in node.decorator_list])


def literal_dict(node):
    """The literal-valued items of a dict display (others are left out)."""
    out = {}
    if not isinstance(node, ast.Dict):
        return out
    for k, v in zip(node.keys, node.values):
        if k is None:
            continue
        try:
            key = ast.literal_eval(k)
            val = ast.literal_eval(v)
        except (ValueError, SyntaxError, TypeError):
            continue
        if not isinstance(key, str):
            continue
        try:
            json.dumps(val)
        except (TypeError, ValueError):
            continue
        out[key] = val
    return out


def inductor_info(dec):
    if not isinstance(dec, ast.Call):
        return None
    name = decorator_name(dec) or ""
    if name.rsplit(".", 1)[-1] not in INDUCTOR_KINDS or "heuristics" not in name:
        return None
    info = {"decorator": name}
    for kw in dec.keywords:
        if kw.arg in ("triton_meta", "inductor_meta"):
            info[kw.arg] = literal_dict(kw.value)
        elif kw.arg in ("size_hints", "min_elem_per_thread", "reduction_hint", "tile_hint"):
            try:
                info[kw.arg] = ast.literal_eval(kw.value)
            except (ValueError, SyntaxError, TypeError):
                pass
    return info


# ---------------------------------------------------------------------------
# Module names and files


def stdlib_top_names():
    names = getattr(sys, "stdlib_module_names", None)
    if names:
        return set(names) | set(sys.builtin_module_names)
    return set(sys.builtin_module_names)


STDLIB = stdlib_top_names()
STDLIB_DIRS = [d for d in (sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")) if d]


def is_environment_module(name):
    top = name.split(".")[0]
    if top in ENVIRONMENT_PACKAGES or top in STDLIB:
        return True
    if not getattr(sys, "stdlib_module_names", None):  # Python < 3.10: look in the stdlib folder
        for d in STDLIB_DIRS:
            if os.path.exists(os.path.join(d, top + ".py")) or os.path.isdir(os.path.join(d, top)):
                return True
    return False


def package_root(file, module):
    """The sys.path folder of `module` defined in `file` (/x/a/b/c.py for
    a.b.c -> /x), or None when they do not agree."""
    if not module or module == "__main__":
        return None
    parts = module.split(".")
    path = os.path.abspath(file)
    if os.path.basename(path) == "__init__.py":
        path = os.path.dirname(path)
    else:
        path = os.path.splitext(path)[0]
    for p in reversed(parts):
        if os.path.basename(path) != p:
            return None
        path = os.path.dirname(path)
    return path


def resolve_file(name, roots):
    """(file, is_package) of module `name` under one of `roots`, else
    (None, why)."""
    rel = name.replace(".", os.sep)
    for root in roots:
        for cand, pkg in ((os.path.join(root, rel, "__init__.py"), True), (os.path.join(root, rel + ".py"), False)):
            if os.path.isfile(cand):
                return cand, pkg
        base = os.path.join(root, os.path.dirname(rel))
        leaf = os.path.basename(rel)
        if os.path.isdir(base):
            try:
                for f in os.listdir(base):
                    if f.startswith(leaf + ".") and f.endswith((".so", ".pyd")):
                        return None, "a compiled extension (%s)" % os.path.join(base, f)
            except OSError:
                pass
    return None, "no source file for it under %s" % (", ".join(roots) or "any recorded sys.path folder")


def absolute_name(node, current):
    """The absolute module name of an ImportFrom (relative ones resolved
    against the module `current`, a package when `is_package`)."""
    if not node.level:
        return node.module or ""
    name, is_package = current
    if not name or name == "__main__":
        return None
    parts = name.split(".")
    if not is_package:
        parts = parts[:-1]
    up = node.level - 1
    if up > len(parts):
        return None
    base = parts[:len(parts) - up] if up else parts
    return ".".join(base + ([node.module] if node.module else []))


# ---------------------------------------------------------------------------
# Slicing one module


class ModuleSlice:
    """One parsed module and the closure of what a set of names needs."""

    def __init__(self, path):
        with open(path, "rb") as f:
            raw = f.read()
        self.path = path
        self.text = raw.decode("utf-8", "replace")
        self.tree = ast.parse(self.text, filename=path)
        self.lines = self.text.splitlines(keepends=True)
        if self.lines and not self.lines[-1].endswith("\n"):
            self.lines[-1] += "\n"
        self.body = self.tree.body
        self.binders = {}
        for i, node in enumerate(self.body):
            if is_main_guard(node):
                continue
            for n in bound_names(node):
                self.binders.setdefault(n, []).append(i)

    def closure(self, names, keep=None, skip=None):
        """Indexes of the statements binding `names`, transitively."""
        keep = set(keep or ())
        work = list(names)
        seen = set()
        while work:
            name = work.pop()
            if name in seen:
                continue
            seen.add(name)
            for i in self.binders.get(name, []):
                if i in keep or i == skip:
                    continue
                keep.add(i)
                work.extend(referenced_names([self.body[i]]))
        return keep


def import_requests(node, kept_nodes, current):
    """What an import statement asks of other modules, for the names the
    kept code uses: [(absolute module, {names} or None for "the module
    itself", alias bound)]. `current` = (module name, is_package)."""
    used = referenced_names(kept_nodes)
    chains = attribute_chains(kept_nodes)
    out = []
    if isinstance(node, ast.ImportFrom):
        mod = absolute_name(node, current)
        for a in node.names:
            bound = a.asname or a.name
            if a.name == "*" or bound not in used:
                continue
            attrs = {c.split(".", 2)[1] for c in chains if c.startswith(bound + ".")}
            out.append((mod, a.name, bound, attrs))
    else:
        for a in node.names:
            bound = a.asname or a.name.split(".")[0]
            if bound not in used:
                continue
            if a.asname:
                attrs = {c.split(".", 2)[1] for c in chains if c.startswith(bound + ".")}
                out.append((a.name, None, bound, attrs))
            else:
                # "import a.b.c" binds "a"; "a.b.c.f" asks f of a.b.c.
                prefix = a.name + "."
                attrs = {c[len(prefix):].split(".")[0] for c in chains if c.startswith(prefix)}
                out.append((a.name, None, bound, attrs))
    return out


class Slicer:
    """The kernel's module and, transitively, the application modules it
    takes helpers from."""

    def __init__(self, kernel_file, kernel_module, roots):
        self.kernel_file = os.path.abspath(kernel_file)
        self.kernel_module = kernel_module or ""
        root = package_root(self.kernel_file, self.kernel_module)
        self.roots = [r for r in dict.fromkeys(([root] if root else []) + [os.path.abspath(r) for r in roots or []
                                                                        if isinstance(r, str) and r])
                      if os.path.isdir(r)]
        self.modules = {}      # name -> {"slice", "package", "names", "file"}
        self.not_copied = []

    # -- requests ------------------------------------------------------------

    def request(self, module, names, why_ctx):
        """Asks `names` of application module `module`; False (with a
        not_copied entry) when it cannot be copied."""
        if module is None:
            self.not_copied.append({"module": None, "names": sorted(names), "why": "a relative import outside a "
                                    "known package (%s)" % why_ctx})
            return False
        if is_environment_module(module):
            return True
        entry = self.modules.get(module)
        if entry is None:
            if len(self.modules) >= MAX_MODULES:
                self.not_copied.append({"module": module, "names": sorted(names),
                                        "why": "more than %d modules to copy" % MAX_MODULES})
                return False
            file, pkg = resolve_file(module, self.roots)
            if file is None:
                self.not_copied.append({"module": module, "names": sorted(names), "why": pkg})
                return False
            try:
                sl = ModuleSlice(file)
            except (OSError, SyntaxError, ValueError, RecursionError) as e:
                self.not_copied.append({"module": module, "names": sorted(names),
                                        "why": "%s: %s" % (type(e).__name__, e)})
                return False
            entry = {"slice": sl, "package": pkg, "names": set(), "file": file, "dirty": True}
            self.modules[module] = entry
        missing = set(names) - entry["names"]
        if missing:
            entry["names"] |= missing
            entry["dirty"] = True
        return True

    def follow_imports(self, sl, keep, current):
        """Requests what the kept imports of a module need; returns the
        indexes of imports that could not be resolved (kept as they are)."""
        kept_nodes = [sl.body[i] for i in keep if not isinstance(sl.body[i], (ast.Import, ast.ImportFrom))]
        failed = set()
        for i in sorted(keep):
            node = sl.body[i]
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            for mod, name, bound, attrs in import_requests(node, kept_nodes, current):
                if mod is not None and is_environment_module(mod):
                    continue
                if name is None:
                    # import M / import M as U: the attributes used.
                    if not attrs:
                        self.not_copied.append({"module": mod, "names": [bound], "why": "the module is used as "
                                                "a value, not through attributes"})
                        failed.add(i)
                        continue
                    if not self.request(mod, attrs, sl.path):
                        failed.add(i)
                    continue
                # from M import name: an attribute of M, or its submodule.
                if mod is not None and name not in self._binders_of(mod):
                    sub = mod + "." + name
                    file, _ = resolve_file(sub, self.roots)
                    if file is not None:
                        if not attrs:
                            self.not_copied.append({"module": sub, "names": [bound], "why": "the module is used as "
                                                    "a value, not through attributes"})
                            failed.add(i)
                        elif not self.request(sub, attrs, sl.path):
                            failed.add(i)
                        else:
                            self.request(mod, set(), sl.path)  # the package itself (an empty one will do)
                        continue
                if not self.request(mod, {name}, sl.path):
                    failed.add(i)
        return failed

    def _binders_of(self, module):
        if is_environment_module(module):
            return {}
        file, _ = resolve_file(module, self.roots)
        if file is None:
            return {}
        entry = self.modules.get(module)
        if entry is not None:
            return entry["slice"].binders
        try:
            return ModuleSlice(file).binders
        except (OSError, SyntaxError, ValueError, RecursionError):
            return {}

    # -- pieces --------------------------------------------------------------

    @staticmethod
    def pieces(sl, keep, target=None, kept_decs=(), rewrite_relative=None, failed=()):
        pieces, dropped = [], []
        for i, node in enumerate(sl.body):
            if is_main_guard(node):
                continue
            is_import = isinstance(node, (ast.Import, ast.ImportFrom))
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                pieces.append({"kind": "future", "names": [], "line": node.lineno, "start_line": node.lineno,
                               "text": segment(sl.lines, node)})
                continue
            if is_import and i not in keep:
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(m == k or m.startswith(k + ".") for m in mods for k in ALWAYS_KEEP_MODULES) \
                        and not (isinstance(node, ast.ImportFrom) and node.level):
                    keep.add(i)
                else:
                    dropped.append(segment(sl.lines, node).strip())
                    continue
            if i not in keep:
                continue
            if target is not None and node is target:
                decs = "".join("@%s\n" % ast.get_source_segment(sl.text, d) for d in kept_decs)
                text = decs + segment(sl.lines, node)
                pieces.append({"kind": "target", "names": [node.name], "line": node.lineno,
                               "start_line": node.lineno - decs.count("\n"), "text": text})
                continue
            kind = "import" if is_import else (
                "function" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                else "statement")
            start = function_start(node) if kind == "function" else node.lineno
            text = segment(sl.lines, node, start)
            if kind == "import" and rewrite_relative is not None and isinstance(node, ast.ImportFrom) \
                    and node.level and i not in failed:
                absolute = rewrite_relative(node)
                if absolute:
                    names = ", ".join(a.name + (" as " + a.asname if a.asname else "") for a in node.names)
                    text = "from %s import %s\n" % (absolute, names)
            piece = {"kind": kind, "names": sorted(bound_names(node)), "line": node.lineno, "start_line": start,
                     "text": text}
            if is_import and i in failed:
                piece["not_copied"] = True
            pieces.append(piece)
        return pieces, dropped

    # -- the whole thing ---------------------------------------------------------

    def run(self, fname):
        ks = ModuleSlice(self.kernel_file)
        body = ks.body
        target_idx = None
        for i, node in enumerate(body):
            if isinstance(node, ast.FunctionDef) and node.name == fname:
                target_idx = i  # the last definition wins, as at import time
        if target_idx is None:
            return {"ok": False, "error": "no top-level function %s in the module" % fname}
        target = body[target_idx]
        kept_decs = [d for d in target.decorator_list if is_jit_decorator(d)]
        removed_decs = [d for d in target.decorator_list if not is_jit_decorator(d)]
        inductor = None
        for d in removed_decs:
            inductor = inductor or inductor_info(d)
        # What the kernel refers to: its signature, body and kept decorators.
        refs = referenced_names([target.args] + target.body + kept_decs +
                                ([target.returns] if target.returns else []))
        keep = ks.closure(refs, keep={target_idx}, skip=target_idx)
        is_pkg = os.path.basename(self.kernel_file) == "__init__.py"
        current = (self.kernel_module, is_pkg)
        kernel_failed = self.follow_imports(ks, keep, current)
        # The helper modules, until nothing new is asked of any.
        rounds = 0
        while any(e["dirty"] for e in self.modules.values()) and rounds < 4 * MAX_MODULES:
            rounds += 1
            for name, e in list(self.modules.items()):
                if not e["dirty"]:
                    continue
                e["dirty"] = False
                sl = e["slice"]
                e["keep"] = sl.closure(e["names"])
                e["failed"] = self.follow_imports(sl, e["keep"], (name, e["package"]))
                missing = sorted(n for n in e["names"] if n not in sl.binders)
                e["missing"] = missing
        pieces, dropped = self.pieces(ks, keep, target=target, kept_decs=kept_decs,
                                      rewrite_relative=lambda node: absolute_name(node, current),
                                      failed=kernel_failed)
        modules = []
        for name, e in sorted(self.modules.items()):
            mp, md = self.pieces(e["slice"], set(e.get("keep") or ()), failed=e.get("failed") or ())
            modules.append({"module": name, "file": e["file"], "package": e["package"],
                            "names": sorted(e["names"]), "missing": e.get("missing") or [],
                            "pieces": mp, "dropped_imports": md})
            for n in e.get("missing") or []:
                self.not_copied.append({"module": name, "names": [n], "why": "no top-level statement of %s binds "
                                        "it" % os.path.basename(e["file"])})
        # The def as Triton's JITFunction.src holds it: dedented, from "def".
        src = textwrap.dedent(segment(ks.lines, target, function_start(target)))
        m = re.search(r"^def\s+\w+\s*\(", src, re.MULTILINE)
        def_text = src[m.start():] if m else src
        return {
            "ok": True,
            "pieces": pieces,
            "target": {
                "name": target.name,
                "line": target.lineno,
                "def_text": def_text,
                "def_sha256": hashlib.sha256(def_text.encode("utf-8", "replace")).hexdigest(),
                "decorators_kept": ["@" + ast.get_source_segment(ks.text, d) for d in kept_decs],
                "decorators_removed": ["@" + (ast.get_source_segment(ks.text, d) or "?") for d in removed_decs],
            },
            "dropped_imports": dropped,
            "modules": modules,
            "not_copied": self.not_copied,
            "roots": self.roots,
            "inductor": inductor,
        }


def slice_module(path, fname, options=None):
    options = options or {}
    return Slicer(path, options.get("module"), options.get("roots")).run(fname)


def main(argv):
    out = {"python": "%d.%d.%d" % sys.version_info[:3]}
    if sys.version_info < (3, 8):
        out.update(ok=False, error="python %s is older than 3.8 (no end positions in ast)" % out["python"])
    elif len(argv) not in (3, 4):
        out.update(ok=False, error="usage: slice_kernel.py MODULE_FILE FUNCTION_NAME [OPTIONS_JSON]")
    else:
        try:
            options = json.loads(argv[3]) if len(argv) == 4 else {}
            if not isinstance(options, dict):
                raise ValueError("OPTIONS_JSON is not an object")
            out.update(slice_module(argv[1], argv[2], options))
        except (OSError, SyntaxError, ValueError, RecursionError) as e:
            out.update(ok=False, error="%s: %s" % (type(e).__name__, e))
    sys.stdout.write(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
