"""``nvidia-smi nvlink -s``: each GPU's links, up with their speed or inactive (the ``nvidia.nvlink`` fact)."""
from __future__ import annotations

import re
from typing import Any

from ..untrusted import Unreadable, text_number
from .base import UntrustedOutput
from .nvidia_values import _gpu_line

_NVLINK_LINK = re.compile(r"^\s*Link\s+([0-9]{1,4}):(.*)$")  # the text stripped after: linear (not \s*(.*?)\s*$)
_LINK_WORD = re.compile(r"^\s*Link\s+\S+:")
_NVLINK_SPEED = re.compile(r"^([0-9]{1,6}(?:\.[0-9]{1,6})?)\s*GB/s$")
_GPU_HEAD = re.compile(r"GPU\s+[0-9]{1,4}:(?=\s|$)")  # nvlink -s's GPU line, not -q's "GPU 00000000:18:00.0"
#: The fastest one link runs, per direction (GB/s): NVLink 5 prints 53.125 (bringup/data/nvlink.yaml); a few
#: hundred leaves room for generations to come.  A figure above it (10^39, 400 nines) was not measured.
LINK_GBS_MAX = 400.0
_NVLINK_ALL_INACTIVE = re.compile(r"all links are in-?active", re.I)


def parse_nvlink_status(output: str) -> list[dict[str, Any]]:
    """``nvidia-smi nvlink -s`` → one ``{index, name, uuid, links: [{link, gbps, active}]}`` per GPU line.

    A link prints its speed (``Link 0: 26.562 GB/s``, per direction) or ``<inactive>`` (``gbps`` None,
    ``active`` False).  A GPU without NVLink prints no link line (``links`` ``[]``); a GPU whose every link is
    down may print NVML's notice "... all links are inActive" instead (``all_inactive`` True, ``links`` ``[]``);
    other lines that are no link line (NVML's notices) are skipped.  A link line in any other form (cut short, ``Link 3: 25``) raises
    :class:`UntrustedOutput`: a link must not pass for up, or vanish; so does a link, a GPU index or a UUID printed
    twice.
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
        if gpus and m is None and _LINK_WORD.match(line):
            # A link line whose number is no number (`Link ٣:`, `Link 9999999999999999999:`): named, never a link
            # that vanishes from the count.
            raise UntrustedOutput(f"nvidia-smi nvlink -s: GPU {gpus[-1]['index']}: a link line whose link number is "
                                  "not one (output damaged?)")
        if not gpus or m is None:
            continue  # NVML's notices, and lines of no link
        value = m.group(2).strip()
        speed = _NVLINK_SPEED.match(value)
        if speed is None and value.strip("<>").lower() != "inactive":
            raise UntrustedOutput(f"nvidia-smi nvlink -s: GPU {gpus[-1]['index']} link {m.group(1)}: "
                                  f"{value[:40]!r} is neither a speed nor <inactive> (output cut short?)")
        gbps = None
        if speed:
            try:
                gbps = float(text_number(speed.group(1), lo=0, hi=LINK_GBS_MAX, what="its speed (GB/s)"))
            except Unreadable as e:
                raise UntrustedOutput(f"nvidia-smi nvlink -s: GPU {gpus[-1]['index']} link {m.group(1)}: {e}: "
                                      "unreadable") from None
        if any(l["link"] == int(m.group(1)) for l in gpus[-1]["links"]):
            # nvidia-smi prints each link once: a second (one link up twice, another missing) hid a link that
            # may be down behind the copy, and read as every link up.
            raise UntrustedOutput(f"nvidia-smi nvlink -s: GPU {gpus[-1]['index']} link {int(m.group(1))} is printed "
                                  "twice: not one report")
        gpus[-1]["links"].append({"link": int(m.group(1)), "gbps": gbps, "active": speed is not None})
    _whole(output, gpus)
    for key in ("index", "uuid"):
        seen: set[Any] = set()
        for g in gpus:
            if g.get(key) is None:
                continue
            if g[key] in seen:
                raise UntrustedOutput(f"nvidia-smi nvlink -s: two GPUs with {key} {str(g[key])[:60]!r}: a GPU "
                                      "printed twice, not one report")
            seen.add(g[key])
    return gpus


def _whole(output: str, gpus: list[dict[str, Any]]) -> None:
    """Raise :class:`UntrustedOutput` where the output was cut: a GPU line cut in its middle, or a last GPU with
    fewer link lines than an earlier GPU of the same part (nvidia-smi prints every link of a part, an inactive one
    as ``<inactive>``), none included.  A last GPU with no link line whose part no earlier GPU is (a mixed host's
    L4 after its bridged H100s) is a GPU without NVLink, as nvidia-smi prints it: read, never the whole output
    unreadable.  (A link line cut in its middle is no speed: refused above; a GPU cut before its "GPU N:" is
    missing, which the health line names against nvidia-smi -q's GPUs.)"""
    for text in output.splitlines():
        head = _GPU_HEAD.match(text.strip())
        if head and not _gpu_line(text.strip()):
            raise UntrustedOutput(f"nvidia-smi nvlink -s: {head.group(0)} {text.strip()[len(head.group(0)):][:40]!r}"
                                  " is not a whole GPU line (output cut short?): unreadable")
    if len(gpus) >= 2 and not gpus[-1].get("all_inactive"):
        last = gpus[-1]
        peers = [g for g in gpus[:-1] if g["name"] == last["name"]]
        before = max(peers, key=lambda g: len(g["links"]), default=None)
        if before is not None and len(last["links"]) < len(before["links"]):
            raise UntrustedOutput(f"nvidia-smi nvlink -s: GPU {last['index']}, the last, has {len(last['links'])} "
                                  f"link line(s), GPU {before['index']} (the same part) {len(before['links'])} "
                                  "(output cut short?): unreadable")
