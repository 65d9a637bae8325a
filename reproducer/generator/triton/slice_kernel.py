"""slice_kernel.py: cuts a Triton kernel, and what it needs, out of its module.

Embedded in the reproducer generator (triton_project.cc) and run by it as
``python3 -I -c <this file> MODULE_FILE FUNCTION_NAME``. It only parses the
module (``ast``): nothing of it is imported or executed. Prints one JSON
object on stdout:

  ok                 true, or false with "error"
  pieces[]           the top-level statements to keep, in file order:
                     {kind: "future"|"import"|"statement"|"function"|"target",
                      names: [names it binds], line, text}
                     "target" is the kernel: its text has only the @triton.jit
                     decorator(s) left (autotune, heuristics and Inductor's
                     triton_heuristics.* decorators removed: the reproducer
                     pins the configuration)
  target             {name, line (of the def), def_text (from "def", as
                      Triton's JITFunction.src holds it), def_sha256,
                      decorators_kept[], decorators_removed[]}
  dropped_imports[]  top-level imports nothing kept refers to
  inductor           for a kernel with an Inductor decorator
                     (@triton_heuristics.pointwise(...), ...): {decorator,
                     triton_meta, inductor_meta} with the keys whose values are
                     literals
  python             the interpreter's version

What is kept: the kernel; every top-level statement binding a name the kept
code refers to (other @triton.jit functions, constants, imports, try/if
blocks that define names), transitively; `from __future__` imports; imports
of triton and torch._inductor modules. Never the `if __name__ == "__main__":`
block, expression statements, or anything else.
"""
import ast
import hashlib
import json
import re
import sys
import textwrap

JIT_NAMES = ("jit",)
ALWAYS_KEEP_MODULES = ("triton", "torch._inductor")
INDUCTOR_KINDS = ("pointwise", "reduction", "persistent_reduction", "cooperative_reduction",
                  "split_scan", "template", "user_autotune", "foreach", "fixed_config")


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


def slice_module(path, fname):
    with open(path, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8", "replace")
    tree = ast.parse(text, filename=path)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    body = tree.body
    target_idx = None
    for i, node in enumerate(body):
        if isinstance(node, ast.FunctionDef) and node.name == fname:
            target_idx = i  # the last definition wins, as at import time
    if target_idx is None:
        return {"ok": False, "error": "no top-level function %s in the module" % fname}
    target = body[target_idx]

    binders = {}
    for i, node in enumerate(body):
        if i == target_idx or is_main_guard(node):
            continue
        for n in bound_names(node):
            binders.setdefault(n, []).append(i)

    kept_decs = [d for d in target.decorator_list if is_jit_decorator(d)]
    removed_decs = [d for d in target.decorator_list if not is_jit_decorator(d)]
    inductor = None
    for d in removed_decs:
        inductor = inductor or inductor_info(d)

    keep = {target_idx}
    # What the kernel refers to: its signature, body and kept decorators.
    work = list(referenced_names([target.args] + target.body + kept_decs +
                                 ([target.returns] if target.returns else [])))
    seen = set()
    while work:
        name = work.pop()
        if name in seen:
            continue
        seen.add(name)
        for i in binders.get(name, []):
            if i in keep:
                continue
            keep.add(i)
            work.extend(referenced_names([body[i]]))

    pieces = []
    dropped_imports = []
    for i, node in enumerate(body):
        if is_main_guard(node):
            continue
        is_import = isinstance(node, (ast.Import, ast.ImportFrom))
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            pieces.append({"kind": "future", "names": [], "line": node.lineno,
                           "text": segment(lines, node)})
            continue
        if is_import and i not in keep:
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m == k or m.startswith(k + ".") for m in mods for k in ALWAYS_KEEP_MODULES) \
                    and not (isinstance(node, ast.ImportFrom) and node.level):
                keep.add(i)
            else:
                dropped_imports.append(segment(lines, node).strip())
                continue
        if i not in keep:
            continue
        if i == target_idx:
            decs = "".join("@%s\n" % ast.get_source_segment(text, d) for d in kept_decs)
            pieces.append({"kind": "target", "names": [target.name], "line": target.lineno,
                           "text": decs + segment(lines, target)})
            continue
        kind = "import" if is_import else (
            "function" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            else "statement")
        start = function_start(node) if kind == "function" else node.lineno
        pieces.append({"kind": kind, "names": sorted(bound_names(node)), "line": node.lineno,
                       "text": segment(lines, node, start)})

    # The def as Triton's JITFunction.src holds it: dedented, from "def".
    src = textwrap.dedent(segment(lines, target, function_start(target)))
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
            "decorators_kept": ["@" + ast.get_source_segment(text, d) for d in kept_decs],
            "decorators_removed": ["@" + (ast.get_source_segment(text, d) or "?") for d in removed_decs],
        },
        "dropped_imports": dropped_imports,
        "inductor": inductor,
    }


def main(argv):
    out = {"python": "%d.%d.%d" % sys.version_info[:3]}
    if sys.version_info < (3, 8):
        out.update(ok=False, error="python %s is older than 3.8 (no end positions in ast)" % out["python"])
    elif len(argv) != 3:
        out.update(ok=False, error="usage: slice_kernel.py MODULE_FILE FUNCTION_NAME")
    else:
        try:
            out.update(slice_module(argv[1], argv[2]))
        except (OSError, SyntaxError, ValueError, RecursionError) as e:
            out.update(ok=False, error="%s: %s" % (type(e).__name__, e))
    sys.stdout.write(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
