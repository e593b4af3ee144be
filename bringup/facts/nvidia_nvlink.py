"""``nvidia-smi nvlink -s``: each GPU's links, up with their speed or inactive (the ``nvidia.nvlink`` fact)."""
from __future__ import annotations

import re
from typing import Any

from .base import UntrustedOutput
from .nvidia_values import _gpu_line

_NVLINK_LINK = re.compile(r"^\s*Link\s+(\d+):(.*)$")  # the text stripped after: linear (not \s*(.*?)\s*$)
_NVLINK_SPEED = re.compile(r"^(\d+(?:\.\d+)?)\s*GB/s$")
_NVLINK_ALL_INACTIVE = re.compile(r"all links are in-?active", re.I)


def parse_nvlink_status(output: str) -> list[dict[str, Any]]:
    """``nvidia-smi nvlink -s`` → one ``{index, name, uuid, links: [{link, gbps, active}]}`` per GPU line.

    A link prints its speed (``Link 0: 26.562 GB/s``, per direction) or ``<inactive>`` (``gbps`` None,
    ``active`` False).  A GPU without NVLink prints no link line (``links`` ``[]``); a GPU whose every link is
    down may print NVML's notice "... all links are inActive" instead (``all_inactive`` True, ``links`` ``[]``);
    other lines that are no link line (NVML's notices) are skipped.  A link line in any other form (cut short, ``Link 3: 25``) raises
    :class:`UntrustedOutput`: a link must not pass for up, or vanish.
    """
    gpus: list[dict[str, Any]] = []
    for line in output.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        g = _gpu_line(line.strip())
        if g:
            gpus.append({"index": g[0], "name": g[1], "uuid": g[2], "links": []})
            continue
        m = _NVLINK_LINK.match(line)
        if gpus and m is None and _NVLINK_ALL_INACTIVE.search(line):
            # NVML's notice in place of the link lines: "Unable to retrieve NVLink information as all links are
            # inActive" (a GPU whose every link is down, not a GPU without NVLink).
            gpus[-1]["all_inactive"] = True
            continue
        if not gpus or m is None:
            continue  # NVML's notices, and lines of no link
        value = m.group(2).strip()
        speed = _NVLINK_SPEED.match(value)
        if speed is None and value.strip("<>").lower() != "inactive":
            raise UntrustedOutput(f"nvidia-smi nvlink -s: GPU {gpus[-1]['index']} link {m.group(1)}: "
                                  f"{value[:40]!r} is neither a speed nor <inactive> (output cut short?)")
        gpus[-1]["links"].append({"link": int(m.group(1)), "gbps": float(speed.group(1)) if speed else None,
                                  "active": speed is not None})
    return gpus
