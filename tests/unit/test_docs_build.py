"""The documentation: docs/ built by MkDocs with --strict, the role pages' variables tables as the models say,
and a README that stays the short front page (issue 43 item 4)."""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "mkdocs.yml"
HOOK = REPO / "scripts" / "role_docs.py"


def _role_docs():
    spec = importlib.util.spec_from_file_location("role_docs", HOOK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.fail("mkdocs is not installed: pip install -e '.[test]' (it is among the test extras)")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=REPO, capture_output=True, text=True, timeout=300)


def _nav_pages(nav) -> list[str]:
    out = []
    for item in nav:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            for v in item.values():
                out += _nav_pages(v) if isinstance(v, list) else [v]
    return out


def test_the_site_builds_strict(tmp_path):
    done = _mkdocs(CONFIG, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "RELIABILITY" / "index.html").is_file()
    # The hook wrote the variables tables: a role page carries its variables as the model declares them.
    triton = (tmp_path / "site" / "roles" / "triton" / "index.html").read_text(encoding="utf-8")
    assert "<code>triton_model_repository</code>" in triton and "<code>max_batch_size</code>" in triton


def _copy(tmp_path: Path) -> Path:
    """The docs and their config in a temporary folder, the hook taken from the checkout."""
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    text = CONFIG.read_text(encoding="utf-8")
    assert "  - scripts/role_docs.py\n" in text
    (tmp_path / "mkdocs.yml").write_text(text.replace("  - scripts/role_docs.py\n", f"  - {HOOK}\n"),
                                         encoding="utf-8")
    return tmp_path / "mkdocs.yml"


@pytest.mark.parametrize("damage, said", [
    (lambda d: (d / "orphan.md").write_text("# a page no one lists\n"), "not included in the \"nav\""),
    (lambda d: (d / "index.md").write_text((d / "index.md").read_text() + "\n[gone](no-such-page.md)\n"),
     "no-such-page.md"),
    (lambda d: (d / "index.md").write_text((d / "index.md").read_text() + "\n[gone](inventory.md#no-such-part)\n"),
     "no-such-part"),
], ids=["orphan page", "broken link", "broken anchor"])
def test_an_orphan_page_or_a_broken_link_fails_the_build(tmp_path, damage, said):
    config = _copy(tmp_path)  # the copy builds as the checkout does (test_the_site_builds_strict)
    damage(tmp_path / "docs")
    done = _mkdocs(config, tmp_path / "site")
    assert done.returncode != 0 and said in done.stdout + done.stderr, done.stdout + done.stderr


def test_every_role_has_a_page_in_nav_with_its_variables_as_the_models_say():
    docs = _role_docs()
    order, roles = docs.load(REPO)
    nav = _nav_pages(yaml.safe_load(CONFIG.read_text(encoding="utf-8"))["nav"])
    assert [p for p in nav if p.startswith("roles/") and p != "roles/index.md"] == [f"roles/{r}.md" for r in order]
    # Committed pages equal what the generator writes: run `python scripts/role_docs.py` after changing a Vars.
    assert docs.stale_pages(REPO) == []


def test_a_changed_model_makes_its_page_stale(tmp_path):
    """The check that keeps the pages honest can fail: a page whose table lost a variable is named."""
    docs = _role_docs()
    order, roles = docs.load(REPO)
    role = roles["sysctl"]
    page = (REPO / "docs" / "roles" / "sysctl.md").read_text(encoding="utf-8")
    assert docs.page_text(role, page) == page
    damaged = page.replace("| `sysctl_profile` |", "| `sysctl_profil` |")
    assert damaged != page and docs.page_text(role, damaged) == page


def test_the_readme_is_the_short_front_page():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= 15 * 1024
    lines = text.splitlines()
    assert lines[0] == "# bringup" and lines[2].startswith("Bring up low-latency NVIDIA Triton inference hosts")
    # The two commands come first, as they were: the first block after the title and the one-line description.
    assert lines[4] == "```sh"
    first_block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    assert "\nbash scripts/setup.sh && invoke sandbox\n" in first_block
    assert first_block.endswith("\nbash scripts/test.sh\n")
    # Every page it links to exists (the README is outside MkDocs' docs_dir, so the build does not check it).
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert links and [link for link in links if not link.startswith("http") and not (REPO / link).exists()] == []



def test_the_build_hook_writes_the_tables_from_the_models_whatever_the_page_holds(tmp_path):
    config = _copy(tmp_path)
    page = tmp_path / "docs" / "roles" / "sysctl.md"
    text = page.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `sysctl_profile` |"))
    page.write_text(text.replace(row + "\n", ""), encoding="utf-8")  # a stale page: the variable's row lost
    done = _mkdocs(config, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    built = (tmp_path / "site" / "roles" / "sysctl" / "index.html").read_text(encoding="utf-8")
    assert "<code>sysctl_profile</code>" in built and "network-latency" in built
