"""`invoke checklist` against a real sandbox host, and its HTML page rendered by Chromium."""
from __future__ import annotations

import re

import pytest
from PIL import Image

from bringup.checklist.pages import render_group_html, render_html
from harness import SANDBOX_VARS, write_inventory
from harness.checklist_pages import eight_gpu_checks, eight_gpu_svg, flat_page, measure, rack_pages, screenshot

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
    # The console shows the page's text without Markdown's escapes of host text (a terminal renders no Markdown);
    # "\\|" stays on both.
    assert re.sub(r"\\([\\`*_~\]])", r"\1", md) in r.stdout
    index = (out / "index.html").read_text()
    assert f'href="{sandbox_host.name}.html"' in index


def test_html_page_renders_in_chromium(sandbox_host, pages, tmp_path):
    out, _ = pages
    shot = screenshot(out / f"{sandbox_host.name}.html", tmp_path / "page.png", tmp_path, width=1200)
    img = Image.open(shot).convert("RGB")
    colours = {c for _, c in img.getcolors(maxcolors=1 << 20)}
    # The SVG drew: the NIC box (#59a14f), the NUMA node's CPUs (#d9d9d9); the page: the WARN verdict's colour.
    assert (0x59, 0xA1, 0x4F) in colours and (0xD9, 0xD9, 0xD9) in colours
    assert (0xFF, 0xF4, 0xCC) in colours


def colours_in(img: Image.Image, box=None) -> set:
    return {c for _, c in (img.crop(box) if box else img).getcolors(maxcolors=1 << 22)}


RED, AMBER, GREEN_BAR = (0xCF, 0x22, 0x2E), (0x9A, 0x67, 0x00), (0x2D, 0xA4, 0x4E)


def test_an_8_gpu_host_page_at_1400_px(tmp_path):
    """The 8x H100 SXM capture's page as Chromium lays it out 1400 px wide (issue 31: the old page broke
    "PA SS" and "plat for m" and gave the GPUs 48 rows): no word broken across lines, no status, area or
    device label wrapped, nothing wider than the window, one row per GPU, the host's passes folded, and a
    page far shorter than the same lines one row each."""
    checks = eight_gpu_checks()
    page = tmp_path / "dgx-h100-07.html"
    page.write_text(render_html("dgx-h100-07", checks, eight_gpu_svg()))
    m = measure(page, tmp_path, 1400)
    assert m["broken"] == [] and m["wrapped"] == [], m
    assert m["width"] <= 1400, m
    assert m["grid_rows"] == [8, 8, 4], m  # GPUs (platform), GPUs (acceptance, health), HCA ports
    assert m["hidden_lines"] == 5 and m["shown_lines"] == 0, m
    flat = tmp_path / "flat.html"
    flat.write_text(flat_page("dgx-h100-07", checks, eight_gpu_svg()))
    before = measure(flat, tmp_path, 1400)["height"]
    assert m["height"] < 0.6 * before, (m["height"], before)
    # Narrower (a laptop, a printed landscape page): still no word broken, nothing wider than the window.
    narrow = measure(page, tmp_path, 1000)
    assert narrow["broken"] == [] and narrow["wrapped"] == [] and narrow["width"] <= 1000, narrow
    img = Image.open(screenshot(page, tmp_path / "page.png", tmp_path, 1400, m["height"])).convert("RGB")
    assert img.size == (1400, m["height"])
    # The verdict is at the top, in the FAIL colour; further down the WARN findings and the GPUs' bars.
    assert RED in colours_in(img, (0, 0, 1400, 140)) and AMBER not in colours_in(img, (0, 0, 1400, 140))
    assert {AMBER, GREEN_BAR} <= colours_in(img)


def test_the_rack_page_in_chromium(tmp_path):
    page = tmp_path / "index.html"
    page.write_text(render_group_html("rack-b12", rack_pages()))
    m = measure(page, tmp_path, 1400)
    assert m["broken"] == [] and m["wrapped"] == [] and m["width"] <= 1400, m
    img = Image.open(screenshot(page, tmp_path / "rack.png", tmp_path, 1400, m["height"])).convert("RGB")
    assert RED in colours_in(img, (0, 0, 1400, 140))
