"""Compiled templates are kept beside the project's bytecode (bringup.engine.templates): a later run loads them
instead of compiling again, a changed template is compiled afresh, and the cache is trusted no further than a
.pyc: a planted FIFO or link is skipped (never a hang), nothing is written where Python writes no bytecode, and
a folder that cannot be written costs the cache, never the render."""
import os
import sys
from pathlib import Path

import pytest

from bringup.engine.templates import Templates


@pytest.fixture()
def project(tmp_path, monkeypatch):
    root = tmp_path / "templates"
    (root / "role").mkdir(parents=True)
    (root / "role" / "a.conf.j2").write_text("value = {{ value }}\n")
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "pyc"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return root


def _cached(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "pyc").rglob("jinja2-*.cache"))


def test_a_second_run_loads_the_compiled_template_and_a_changed_one_is_compiled_again(project, tmp_path, monkeypatch):
    assert Templates(project).render("role/a.conf.j2", value=1) == "value = 1\n"
    (cache,) = _cached(tmp_path)
    compiled = []
    import jinja2

    real = jinja2.Environment.compile
    monkeypatch.setattr(jinja2.Environment, "compile", lambda self, *a, **k: compiled.append(a) or real(self, *a, **k))
    assert Templates(project).render("role/a.conf.j2", value=2) == "value = 2\n"
    assert compiled == []  # loaded, not compiled
    (project / "role" / "a.conf.j2").write_text("changed = {{ value }}\n")
    assert Templates(project).render("role/a.conf.j2", value=3) == "changed = 3\n"
    assert len(compiled) == 1 and _cached(tmp_path) == [cache]


def test_a_planted_fifo_or_link_is_skipped_never_read(project, tmp_path):
    Templates(project).render("role/a.conf.j2", value=1)
    (cache,) = _cached(tmp_path)
    cache.unlink()
    os.mkfifo(cache)  # opening it to read would wait for a writer for ever
    assert Templates(project).render("role/a.conf.j2", value=1) == "value = 1\n"
    os.remove(cache)
    other = tmp_path / "elsewhere"
    other.write_bytes(b"not jinja2's")
    cache.symlink_to(other)
    assert Templates(project).render("role/a.conf.j2", value=4) == "value = 4\n"
    assert other.read_bytes() == b"not jinja2's"  # the rename replaced the link itself, never wrote through it


def test_nothing_is_written_where_python_writes_no_bytecode(project, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert Templates(project).render("role/a.conf.j2", value=1) == "value = 1\n"
    assert _cached(tmp_path) == []


def test_a_folder_that_cannot_be_written_costs_the_cache_not_the_render(project, tmp_path):
    (tmp_path / "pyc").write_text("a file where the cache folder would be")
    assert Templates(project).render("role/a.conf.j2", value=5) == "value = 5\n"
