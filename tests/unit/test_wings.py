"""Issue 43 item 1: bringup/ is wings in layers, read from the code's own imports (AST, nothing imported).

bringup/'s top holds the entry points (:data:`ENTRY`), a few shared leaves (:data:`LEAVES`: they import only
each other) and the wings, lowest first in :data:`LAYERS`.  A wing may import the leaves and the wings below
it, never one above it; no module imports itself back through others (no circle).  Each wing's ``__init__``
docstring says what it owns and, in its ``May import:`` line, the wings below it: the line is held to
:data:`LAYERS` here, so the docstrings cannot drift from the order.

Every import counts: at module level, inside functions and under ``if TYPE_CHECKING:`` alike (a type-only
import is still an arrow a reader follows).  A new top-level module fails the test until it is placed: in a
wing, or in :data:`LEAVES` when every wing needs it and it imports no wing.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: The wings, lowest first: a wing may import the leaves and the wings before it.
LAYERS = ["inventory", "ssh", "latency", "facts", "resources", "hardware", "engine", "acceptance", "pull",
          "checklist", "testinfra", "tasks"]
#: The entry points: above every wing.
ENTRY = {"cli", "entry", "standins", "__main__"}  # standins: the console script's start (bringup.entry); __main__: python -m bringup
#: The shared leaves at bringup/'s top (and ``_content``, the installed content's package).
LEAVES = {"errors", "userfile", "outfile", "process", "untrusted", "regexes", "secrets", "child", "orphans", "checks",
          "project", "_content", "shipped"}


def _modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under root/bringup."""
    out = {}
    for f in sorted((root / "bringup").rglob("*.py")):
        parts = list(f.relative_to(root).with_suffix("").parts)
        if "__pycache__" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _imports(root: Path, mods: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {bringup module it imports: line}."""
    graph: dict[str, dict[str, int]] = {}
    for name, f in mods.items():
        pkg = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]
        found: dict[str, int] = {}
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(pkg[:len(pkg) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else (node.module or "")
                # a name that is a module is that module; any other name is the module's (``base``)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                # the longest prefix that is a module of bringup: bringup.x.y.attr -> bringup.x.y
                parts = t.split(".")
                while parts and ".".join(parts) not in mods:
                    parts.pop()
                hit = ".".join(parts)
                if hit and hit != name and hit != "bringup":
                    found.setdefault(hit, node.lineno)
        graph[name] = found
    return graph


def _wing(mod: str, layers: list[str]) -> str:
    """The wing of a module: one of ``layers``, "entry", or "leaves" (bringup's top)."""
    parts = mod.split(".")
    top = parts[1] if len(parts) > 1 else ""
    return "entry" if top in ENTRY else top if top in layers else "leaves"


def _rank(wing: str, layers: list[str]) -> int:
    return 0 if wing == "leaves" else len(layers) + 1 if wing == "entry" else layers.index(wing) + 1


def _circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph[w])))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def problems(root: Path, layers: list[str] = LAYERS) -> list[str]:
    """Everything wrong with root/bringup's wings, one line each (empty: the shape holds)."""
    mods = _modules(root)
    graph = _imports(root, mods)
    out = []
    for p in sorted((root / "bringup").iterdir()):
        name = p.stem if p.suffix == ".py" else p.name
        if p.name == "__init__.py" or p.name.startswith((".", "__")):
            continue
        if p.suffix == ".py" and name not in LEAVES | ENTRY:
            out.append(f"bringup/{p.name}: a top-level module that is neither an entry point nor a shared leaf: "
                       "move it into its wing (or add it to LEAVES if it imports no wing)")
        elif p.is_dir() and (p / "__init__.py").exists() and name not in layers and name not in LEAVES:
            out.append(f"bringup/{name}/: a package that is no wing: add it to LAYERS at its place")
    for mod, targets in graph.items():
        w = _wing(mod, layers)
        for t, line in targets.items():
            tw = _wing(t, layers)
            if _rank(tw, layers) > _rank(w, layers):
                out.append(f"{mods[mod].relative_to(root)}:{line}: {mod} ({w}) imports {t} of the higher "
                           f"{'wing ' + tw if tw not in ('leaves', 'entry') else tw}")
    for comp in _circles(graph):
        out.append("circle: " + " -> ".join(comp))
    for i, wing in enumerate(layers):
        init = root / "bringup" / wing / "__init__.py"
        if not init.exists():
            continue
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        want = "May import: " + ", ".join(["leaves"] + layers[:i]) + "."
        said = re.search(r"^May import:.*$", doc, re.M)
        if not said or said.group(0).strip() != want:
            out.append(f"bringup/{wing}/__init__.py: its docstring says {said.group(0) if said else 'nothing'!r} "
                       f"about its imports; the layers say {want!r}")
    return out


def test_bringup_is_wings_in_layers_without_circles():
    assert problems(REPO) == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in {"bringup/__init__.py": "", "bringup/errors.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


LOW_HIGH = {"bringup/ssh/__init__.py": '"""Low.\n\nMay import: leaves."""\n',
            "bringup/engine/__init__.py": '"""High.\n\nMay import: leaves, ssh."""\n'}


def test_a_lower_wing_importing_a_higher_one_is_named(tmp_path):
    root = _tree(tmp_path, {**LOW_HIGH, "bringup/engine/run.py": "from ..ssh.conn import x\n",
                            "bringup/ssh/conn.py": "x = 1\n\ndef f():\n    from bringup.engine import run\n"})
    found = problems(root, ["ssh", "engine"])
    assert found == ["bringup/ssh/conn.py:4: bringup.ssh.conn (ssh) imports bringup.engine.run of the higher wing "
                     "engine", "circle: bringup.engine.run -> bringup.ssh.conn"], found


def test_a_leaf_importing_a_wing_and_a_circle_inside_a_wing_are_named(tmp_path):
    root = _tree(tmp_path, {**LOW_HIGH, "bringup/errors.py": "from typing import TYPE_CHECKING\n"
                            "if TYPE_CHECKING:\n    from .ssh import conn\n",
                            "bringup/ssh/conn.py": "from . import jump\n", "bringup/ssh/jump.py": "from .conn import x\n"})
    found = problems(root, ["ssh", "engine"])
    assert "bringup/errors.py:3: bringup.errors (leaves) imports bringup.ssh.conn of the higher wing ssh" in found
    assert "circle: bringup.ssh.conn -> bringup.ssh.jump" in found
    assert len(found) == 2, found


def test_an_unplaced_module_and_a_docstring_off_the_layers_are_named(tmp_path):
    root = _tree(tmp_path, {"bringup/ssh/__init__.py": '"""Low.\n\nMay import: leaves, engine."""\n',
                            "bringup/engine/__init__.py": '"""High: no line."""\n',
                            "bringup/topology_text.py": "", "bringup/stray/__init__.py": ""})
    found = problems(root, ["ssh", "engine"])
    assert found == [
        "bringup/stray/: a package that is no wing: add it to LAYERS at its place",
        "bringup/topology_text.py: a top-level module that is neither an entry point nor a shared leaf: move it "
        "into its wing (or add it to LEAVES if it imports no wing)",
        "bringup/ssh/__init__.py: its docstring says 'May import: leaves, engine.' about its imports; the layers "
        "say 'May import: leaves.'",
        "bringup/engine/__init__.py: its docstring says 'nothing' about its imports; the layers say "
        "'May import: leaves, ssh.'"], found
