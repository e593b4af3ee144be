"""No module of bringup/ or bench/ over 500 lines unless its docstring says why (issue 43 item 2).

A module that grows past the limit is split by responsibility (the topology planner apart from its text output,
bench/compare per peer, ...), or its module docstring holds a line starting with "Over 500 lines because" that
gives the reason (bringup/latency/window_tuner.py: the one file a host runs).  The modules other helpers were
splitting when this test was written are listed in KNOWN with who splits them; an entry whose module has come
under the limit fails, so that it is removed rather than left to excuse the next growth.
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIMIT = 500
REASON = "Over 500 lines because"
#: Modules over the limit without a reason yet, each with the helper session splitting it (issue 43 item 2).
KNOWN = {
}


def lines_of(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def says_why(path: Path) -> bool:
    """Whether the module docstring has a line starting with :data:`REASON` followed by a reason."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return any(ln.strip().startswith(REASON) and len(ln.strip()) > len(REASON) + 10 for ln in doc.splitlines())


def too_long(root: Path) -> list[str]:
    """Modules under ``root``'s bringup/ and bench/ over :data:`LIMIT` lines whose docstring does not say why."""
    out = []
    for top in ("bringup", "bench"):
        for path in sorted((root / top).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            if lines_of(path) > LIMIT and not says_why(path):
                out.append(f"{path.relative_to(root)}: {lines_of(path)} lines")
    return sorted(out)


def test_no_module_passes_500_lines_without_saying_why():
    left = [m for m in too_long(REPO) if m.split(":")[0] not in KNOWN]
    assert not left, ("split these by responsibility, or give the module docstring a line "
                      f"'{REASON} ...': " + "; ".join(left))


def test_every_known_exception_is_still_over_the_limit():
    """An exception whose module was split (or says why now) is stale: remove it from KNOWN."""
    stale = [f"{m} ({who})" for m, who in KNOWN.items()
             if not (REPO / m).exists() or lines_of(REPO / m) <= LIMIT or says_why(REPO / m)]
    assert not stale, "remove from KNOWN in tests/unit/test_module_size.py: " + ", ".join(stale)


def test_the_check_flags_a_long_module_and_accepts_one_that_says_why(tmp_path):
    body = "x = 1\n" * LIMIT
    (tmp_path / "bringup").mkdir()
    (tmp_path / "bench").mkdir()
    (tmp_path / "bringup" / "short.py").write_text('"""Short."""\n' + "x = 1\n" * (LIMIT - 1))
    (tmp_path / "bringup" / "long.py").write_text('"""Long, and silent about it."""\n' + body)
    (tmp_path / "bench" / "bare.py").write_text(body + "y = 2\n")
    (tmp_path / "bringup" / "empty_reason.py").write_text(f'"""Long.\n\n{REASON}\n"""\n' + body)
    (tmp_path / "bringup" / "why.py").write_text(
        f'"""Long on purpose.\n\n{REASON} it is shipped to a host as one file.\n"""\n' + body)
    assert too_long(tmp_path) == [f"bench/bare.py: {LIMIT + 1} lines", f"bringup/empty_reason.py: {LIMIT + 4} lines",
                                  f"bringup/long.py: {LIMIT + 1} lines"]
