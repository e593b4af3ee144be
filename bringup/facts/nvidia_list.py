"""``nvidia-smi -L`` (the MIG devices under each GPU) and ``nvidia.query``'s output: ``-q``, a mark, ``-L``."""
from __future__ import annotations

import re
from typing import Any

from .nvidia_q import parse_nvidia_smi_q
from .nvidia_values import _gpu_line

#: The line ``nvidia.query``'s command prints between ``nvidia-smi -q`` and ``nvidia-smi -L``.
LIST_MARK = "--- nvidia-smi -L"

_LIST_MIG = re.compile(r"^\s+MIG\s+(\S+)\s+Device\s+(\d+):\s+\(UUID:\s*([^)\s]+)\)\s*$")


def parse_nvidia_smi_list(output: str) -> list[dict[str, Any]]:
    """``nvidia-smi -L`` → one ``{index, name, uuid, mig_devices}`` per GPU line; ``mig_devices`` lists the
    ``{index, profile, uuid}`` of the ``MIG <profile> Device <n>`` lines under it (``[]``: none).

    A line under a GPU that is neither (cut short, an unknown form) makes that GPU's ``mig_devices`` None:
    its MIG instance count is not known, never undercounted.  Lines before the first GPU (an error text)
    are skipped.
    """
    gpus: list[dict[str, Any]] = []
    for line in output.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        g = _gpu_line(line)
        if g:
            gpus.append({"index": g[0], "name": g[1], "uuid": g[2], "mig_devices": []})
        elif gpus:
            m, devices = _LIST_MIG.match(line), gpus[-1]["mig_devices"]
            if m and devices is not None:
                devices.append({"index": int(m.group(2)), "profile": m.group(1), "uuid": m.group(3)})
            else:
                gpus[-1]["mig_devices"] = None
    return gpus


def parse_nvidia_query(output: str) -> dict[str, Any]:
    """``nvidia.query``'s output: ``nvidia-smi -q`` (:func:`parse_nvidia_smi_q`), then, after the line
    :data:`LIST_MARK`, ``nvidia-smi -L``, whose MIG devices each GPU of the report gets as ``mig_devices``
    (joined by GPU UUID; they name each device's profile and UUID).  Without the mark (an output saved before, a
    capture of ``-q`` alone), or where ``-L`` does not list a GPU whole, the GPU keeps the devices of its own
    ``MIG Devices`` section of ``-q`` (:func:`mig_devices_of`); a GPU whose ``-q`` prints no such section has no
    ``mig_devices``: the count is not known."""
    lines = output.splitlines(keepends=True)
    mark = next((i for i, line in enumerate(lines) if line.rstrip("\r\n") == LIST_MARK), None)
    if mark is None:
        return parse_nvidia_smi_q(output)  # each GPU's "MIG Devices" of -q, where it prints them
    parsed = parse_nvidia_smi_q("".join(lines[:mark]))
    listed = {g["uuid"]: g["mig_devices"] for g in parse_nvidia_smi_list("".join(lines[mark + 1:]))}
    for gpu in parsed.get("gpus") or []:
        if listed.get(gpu.get("uuid")) is not None:
            gpu["mig_devices"] = listed[gpu["uuid"]]
    return parsed
