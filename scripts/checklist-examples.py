#!/usr/bin/env python3
"""Write docs/examples/checklist-8gpu.png and checklist-rack.png: the checklist's HTML pages as Chromium shows
them 1400 px wide, for the reader of docs/examples/README.md.

The pages are harness/checklist_pages.py's: the real 8x H100 SXM capture through the parser and the platform
rules, with findings made in its parsed facts, and a rack of five hosts.  Run from the checkout's root:

    python3 scripts/checklist-examples.py [OUT_DIR]
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PIL import Image  # noqa: E402

from bringup.checklist.pages import render_group_html, render_html  # noqa: E402
from harness.checklist_pages import eight_gpu_checks, eight_gpu_svg, rack_pages, screenshot  # noqa: E402


def small_png(src: Path, dst: Path) -> None:
    """The screenshot in 64 colours (flat colours and text: nothing is lost to the eye), a fraction of the bytes."""
    Image.open(src).convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(dst, optimize=True)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        host, rack = work / "dgx-h100-07.html", work / "index.html"
        host.write_text(render_html("dgx-h100-07", eight_gpu_checks(), eight_gpu_svg()))
        rack.write_text(render_group_html("rack-b12", rack_pages()))
        for page, name in ((host, "checklist-8gpu.png"), (rack, "checklist-rack.png")):
            small_png(screenshot(page, work / name, work, 1400), out / name)
            print(out / name, (out / name).stat().st_size, "bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "examples")
