"""`invoke checklist` against a real sandbox host, and its HTML page rendered by Chromium."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from PIL import Image

from harness import SANDBOX_VARS, write_inventory

from .helpers import invoke

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pages(sandbox_host, tmp_path_factory):
    d = tmp_path_factory.mktemp("checklist")
    write_inventory(d / "hosts", [sandbox_host], extra_vars=SANDBOX_VARS)
    r = invoke("checklist", "--group", "sandbox", "--roles", "sysctl", "--out", "pages", cwd=d)
    return d / "pages", r


def test_checklist_markdown_for_a_cpu_host(sandbox_host, pages):
    out, r = pages
    assert r.returncode == 0, r.stdout + r.stderr  # WARN lines only: the sandbox was never provisioned
    md = (out / f"{sandbox_host.name}.md").read_text()
    assert md.startswith(f"# Bring-up checklist: {sandbox_host.name} — WARN")
    assert "| PASS | gpu | GPUs for the cpu profile | 0 NVIDIA GPU(s) on the PCI bus |" in md
    assert "| WARN | tuning | role sysctl |" in md and "invoke provision --roles sysctl" in md
    assert md in r.stdout
    index = (out / "index.html").read_text()
    assert f"href='{sandbox_host.name}.html'" in index


def test_html_page_renders_in_chromium(sandbox_host, pages, tmp_path):
    out, _ = pages
    chromium = shutil.which("chromium")
    assert chromium, "chromium is installed by scripts/ci-setup.sh"
    shot = tmp_path / "page.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,900",
                    f"--screenshot={shot}", (out / f"{sandbox_host.name}.html").as_uri()],
                   check=True, capture_output=True, timeout=120)
    img = Image.open(shot).convert("RGB")
    colours = {c for _, c in img.getcolors(maxcolors=1 << 20)}
    # The SVG drew: the NIC box (#59a14f), the NUMA node's CPUs (#d9d9d9); the table: a WARN row.
    assert (0x59, 0xA1, 0x4F) in colours and (0xD9, 0xD9, 0xD9) in colours
    assert (0xFF, 0xF4, 0xCC) in colours
