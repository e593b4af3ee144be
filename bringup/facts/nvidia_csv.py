"""``nvidia-smi --query-gpu=... --format=csv``: the ``nvidia.smi`` fact's parser, header-driven."""
from __future__ import annotations

import csv
import re
from typing import Any

from .base import UntrustedOutput
from .nvidia_q import listed_once, smi_error, unreachable_gpus
from .nvidia_values import ABSENT, _mode, _none_if_na, _number
from .pci import normalize_pci_address

#: How the fact's error starts where nvidia-smi --query-gpu said it cannot reach a GPU (its words follow, as
#: :func:`.nvidia_q.smi_error` gives them): :func:`query_unreachable` reads them back.
UNREACHABLE = "nvidia-smi --query-gpu: nvidia-smi cannot reach GPU "


def query_unreachable(error: object) -> str | None:
    """nvidia-smi's words (``nvidia-smi cannot reach GPU 0000:00:06.0: Unknown Error``) where ``error``, the
    ``nvidia.smi`` fact's error, is :func:`parse_query_gpu_csv`'s for a GPU nvidia-smi cannot reach; else None."""
    if not isinstance(error, str) or not error.startswith(UNREACHABLE):
        return None
    return error[len("nvidia-smi --query-gpu: "):]

_QUERY_FIELDS = (
    "index,name,uuid,pci.bus_id,driver_version,memory.total,persistence_mode,"
    "power.limit,clocks.max.sm,compute_cap"
)


#: Unit-less columns that are integers (other unit-less values stay strings:
#: serials such as ``0000000000000`` or ``0x0000`` must not become numbers).
_INT_COLUMNS = {"index", "count", "accounting.buffer_size", "temperature.gpu", "temperature.memory",
                "temperature.gpu.tlimit", "encoder.stats.sessioncount", "encoder.stats.averagefps",
                "encoder.stats.averagelatency"}
_INT_PREFIXES = ("pcie.link.", "ecc.errors.", "remapped_rows.histogram.", "remapped_rows.correctable",
                 "remapped_rows.uncorrectable", "platform.slot_number", "platform.tray_index",
                 "platform.host_id", "platform.module_id")
#: The one column nvidia-smi prints below zero: degrees left to the GPU's limit (past it, negative).  Every other
#: number (sizes, watts, clocks, percentages, counts, an index, a temperature: NVML's are unsigned) below zero is
#: no reading: the fact is refused naming it, never read as a size or index (``-143771 MiB``, index ``-1``).
_SIGNED_COLUMNS = {"temperature.gpu.tlimit"}


def _csv_key(header: str) -> tuple[str, str | None]:
    """``memory.total [MiB]`` → (``memory_total_mib``, ``MiB``); ``pci.bus_id`` → (``pci_bus_id``, None)."""
    h = header.strip()
    at = h.rfind("[")  # linear: not ^(.*?)\s*\[...\]\s*$ over host text
    m = at >= 0 and h.endswith("]") and len(h) - at > 2 and "]" not in h[at + 1:-1]
    base, unit = (h[:at].rstrip(), h[at + 1:-1]) if m else (h, None)
    key = re.sub(r"[^0-9a-z]+", "_", base.lower()).strip("_")
    if unit:
        key += "_" + {"%": "pct"}.get(unit, re.sub(r"[^0-9a-z]+", "_", unit.lower()).strip("_"))
    return key, unit


#: A cell only a GPU's row holds: its UUID or its PCI bus id (never nvidia-smi's error text).
_GPU_CELL = re.compile(r"(?:^|,)\s*(?:GPU-[0-9A-Fa-f]{8}-|[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*(?:,|$))")


def parse_query_gpu_csv(output: str) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=... --format=csv`` → one dict per GPU, header-driven.

    Lines before the header (shell prompts, ``lspci`` output in a capture) are
    skipped: the header is the first line whose fields look like query field
    names.  Error text (no driver, unknown field) gives ``[]``; a GPU's row (a UUID, a bus id) without a header before
    it is :class:`UntrustedOutput` (the output lost its start); nvidia-smi's ``Unable to determine the device handle for
    GPU ...`` (anywhere) is :class:`UntrustedOutput` in its words (:data:`UNREACHABLE`, :func:`query_unreachable`).  After the header every line must be a whole
    row: one with fewer or more fields than the header (cut short, or an error such as ``Unable to determine
    the device handle for GPU ...`` in place of a GPU's row), or a last row without its newline (cut inside its
    last field), is :class:`UntrustedOutput`: a GPU must never vanish from the count unnamed; so are two rows of
    one index, UUID or bus id (:func:`.nvidia_q.listed_once`).
    """
    if unreachable_gpus(output):
        # nvidia-smi's own words for a GPU it cannot open (a GPU fallen off the bus), in place of its row or of the
        # whole listing: no GPU list, and no "no driver" either: the GPU fault, named as nvidia-smi -q's is.
        raise UntrustedOutput("nvidia-smi --query-gpu: " + (smi_error(output) or ""))
    lines = [l for l in output.splitlines() if l.strip() and not l.startswith("#")]
    start = None
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 1 and all(re.fullmatch(r"[A-Za-z_][\w.]*(\s*\[[^\]]+\])?", c) for c in cells):
            if any(c.split(" ")[0] in ("index", "name", "uuid", "pci.bus_id", "driver_version",
                                       "timestamp", "memory.total") for c in cells):
                start = i
                break
    if start is None:
        row = next((line for line in lines if _GPU_CELL.search(line)), None)
        if row is not None:
            # A GPU's row (its UUID or bus id) without the header above it: the output lost its start, and its
            # columns cannot be named.  Read as nvidia-smi's error text it was "no GPU listed: no driver loaded".
            raise UntrustedOutput(f"nvidia-smi --query-gpu: a GPU's row without the header line naming its columns "
                                  f"(output cut short?): {row.strip()[:80]!r}")
        return []
    header = next(csv.reader([lines[start]], skipinitialspace=True))
    keys = [_csv_key(h) for h in header]
    rows = lines[start + 1:]
    if rows and not output.rstrip(" \t").endswith("\n"):
        raise UntrustedOutput(f"nvidia-smi --query-gpu: the last row ends without its newline (cut short?): "
                              f"{rows[-1][:120]!r}")
    gpus: list[dict[str, Any]] = []
    for n, line in enumerate(rows, start=1):
        row = next(csv.reader([line], skipinitialspace=True), [])
        if len(row) != len(header):
            raise UntrustedOutput(f"nvidia-smi --query-gpu: row {n} has {len(row)} of the header's {len(header)} "
                                  f"fields (cut short, or an error in place of a GPU's row): {line[:120]!r}")
        gpu: dict[str, Any] = {}
        for (key, unit), field, raw in zip(keys, header, row):
            field_name = field.split("[", 1)[0].strip().lower()  # linear: not \s*\[.*$ searched over host text
            value = _none_if_na(raw)
            if value is None:
                gpu[key] = None
            elif unit:
                gpu[key] = _number(value, unit)
                if gpu[key] is None and value not in ABSENT:
                    # Read whole: a prefix read took 1e308 for 1 MiB.
                    raise UntrustedOutput(f"nvidia-smi --query-gpu: row {n}: {field.strip()[:40]} "
                                          f"{value[:40]!r} is no number in {unit[:10]}")
                if gpu[key] is not None and gpu[key] < 0 and field_name not in _SIGNED_COLUMNS:
                    raise UntrustedOutput(f"nvidia-smi --query-gpu: row {n}: {field.strip()[:40]} "
                                          f"{value[:40]!r} is below zero: no reading")
            elif field_name in _INT_COLUMNS or field_name.startswith(_INT_PREFIXES):
                number = _number(value)
                if isinstance(number, int) and number < 0 and field_name not in _SIGNED_COLUMNS:
                    raise UntrustedOutput(f"nvidia-smi --query-gpu: row {n}: {field.strip()[:40]} "
                                          f"{value[:40]!r} is below zero: no reading")
                gpu[key] = number if isinstance(number, int) and re.fullmatch(r"-?[0-9]+", value) else value
            else:
                gpu[key] = _mode(value)
        if gpu.get("pci_bus_id"):
            gpu["pci_address"] = normalize_pci_address(str(gpu["pci_bus_id"]))
        gpus.append(gpu)
    listed_once(gpus, "nvidia-smi --query-gpu")
    return gpus
