"""``nvidia-smi -L`` (the MIG devices under each GPU) and ``nvidia.query``'s output: ``-q``, a mark, ``-L``."""
from __future__ import annotations

import re
from typing import Any

from .nvidia_q import parse_nvidia_smi_q
from .nvidia_values import _gpu_line

#: The line ``nvidia.query``'s command prints between ``nvidia-smi -q`` and ``nvidia-smi -L``.
LIST_MARK = "--- nvidia-smi -L"

_LIST_MIG = re.compile(r"^\s+MIG\s+(\S+)\s+Device\s+([0-9]+):\s+\(UUID:\s*([^)\s]+)\)\s*$")


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
    (joined by GPU UUID; they name each device's profile and UUID).

    Each GPU's MIG devices come from both where both print them: ``-q``'s ``MIG Device`` entries
    (:func:`~bringup.facts.nvidia_q.read_mig_devices`) and ``-L``'s lines must list the same device indices, or
    the count is unreadable (``mig_devices`` None, ``mig_devices_unreadable`` says why: one of the two was cut
    short), never the smaller of the two.  Without the mark (an output saved before, a capture of ``-q`` alone),
    or where ``-L`` does not list a GPU or lists it garbled, the GPU keeps the devices of ``-q``; MIG on with
    neither readable is unreadable; a GPU whose ``-q`` prints no MIG device and ``-L`` nothing of it has no
    ``mig_devices``: the count is not known."""
    lines = output.splitlines(keepends=True)
    mark = next((i for i, line in enumerate(lines) if line.rstrip("\r\n") == LIST_MARK), None)
    if mark is None:
        return parse_nvidia_smi_q(output)  # each GPU's MIG devices of -q, where it prints them
    parsed = parse_nvidia_smi_q("".join(lines[:mark]))
    listed = {g["uuid"]: g["mig_devices"] for g in parse_nvidia_smi_list("".join(lines[mark + 1:]))}
    for gpu in parsed.get("gpus") or []:
        if gpu.get("uuid") in listed:
            _join_mig_devices(gpu, listed[gpu["uuid"]])
    return parsed


def _join_mig_devices(gpu: dict[str, Any], from_list: list[dict[str, Any]] | None) -> None:
    """``gpu`` (of ``-q``) given ``-L``'s MIG devices of it (None: its lines there are garbled)."""
    where = gpu.get("bus_id") or gpu.get("uuid")
    if from_list is None:
        if "mig_devices" not in gpu and gpu.get("mig_mode_current") is True:
            gpu["mig_devices"] = None
            gpu["mig_devices_unreadable"] = (f"nvidia-smi -L: a line under GPU {where} is no MIG device line "
                                             "(output cut short?), and -q lists no MIG device")
        return
    if gpu.get("mig_devices_unreadable"):
        return  # -q's own MIG devices are garbled: a whole -L beside them does not make the output whole
    from_q = gpu.get("mig_devices")
    if not isinstance(from_q, list):
        gpu["mig_devices"] = from_list
        return
    if sorted(d["index"] for d in from_q) != sorted(d["index"] for d in from_list):
        gpu["mig_devices"] = None
        gpu["mig_devices_unreadable"] = (f"nvidia-smi -L lists {len(from_list)} MIG device(s) of GPU {where}, "
                                         f"nvidia-smi -q {len(from_q)} (one of the two cut short?)")
        return
    ids = {d["index"]: d for d in from_q}
    gpu["mig_devices"] = [{**ids[d["index"]], "profile": d["profile"], "uuid": d["uuid"]} for d in from_list]
