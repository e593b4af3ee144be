"""NVIDIA GPUs: ``nvidia.smi`` (query CSV), ``nvidia.query`` (``-q``, and ``-L`` for the MIG devices; with
each GPU's own ``health``: ECC, remapped rows, clock event reasons, temperature), ``nvidia.topo``
(``topo -m``), ``nvidia.nvlink`` (``nvlink -s``).

Conventions: ``N/A``, ``[N/A]``, ``[Not Supported]`` and other bracketed
notices become None; ``Enabled``/``Disabled`` become True/False; values with a
unit (``143771 MiB``, ``700.00 W``, ``16x``) become numbers and the unit moves
into the key (``memory_total_mib``).  Bus ids are also given in sysfs form
(``pci_address``: ``0000:00:06.0``) to join with ``pci.devices``.

This module holds the fact classes; each command's parser lives in a module of its own (:mod:`.nvidia_csv`,
:mod:`.nvidia_q` with :mod:`.nvidia_health`, :mod:`.nvidia_list`, :mod:`.nvidia_topo`, :mod:`.nvidia_nvlink`;
shared value readers in :mod:`.nvidia_values`), re-exported here under their old names.
"""
from __future__ import annotations

from .base import Fact
from .nvidia_csv import _QUERY_FIELDS, parse_query_gpu_csv
from .nvidia_health import CLOCK_REASON_BITS, HOLDING_REASONS, gpu_health
from .nvidia_list import LIST_MARK, parse_nvidia_query, parse_nvidia_smi_list
from .nvidia_nvlink import parse_nvlink_status
from .nvidia_q import parse_nvidia_smi_q, parse_nvidia_smi_q_tree
from .nvidia_topo import parse_topo_matrix

__all__ = [
    "NvidiaSmi",
    "NvidiaQuery",
    "NvidiaTopo",
    "parse_query_gpu_csv",
    "parse_nvidia_smi_q",
    "parse_nvidia_smi_q_tree",
    "parse_nvidia_smi_list",
    "parse_nvidia_query",
    "parse_topo_matrix",
    "NvidiaNvlink",
    "parse_nvlink_status",
    "gpu_health",
    "CLOCK_REASON_BITS",
    "HOLDING_REASONS",
]


class _NvidiaSmiFact(Fact):
    """A shared base (no ``name``: not a fact itself): the facts read from ``nvidia-smi``, their default
    on a host without it."""

    requires_command = "nvidia-smi"


class NvidiaSmi(_NvidiaSmiFact):
    name = "nvidia.smi"
    always_prints = True  # its CSV, or its own error on stdout
    command = "nvidia-smi --query-gpu=" + _QUERY_FIELDS + " --format=csv"
    process = staticmethod(parse_query_gpu_csv)


class NvidiaQuery(_NvidiaSmiFact):
    name = "nvidia.query"
    always_prints = True
    # -L beside -q, in the same round trip: the MIG devices under each GPU, one line each.
    command = "nvidia-smi -q\necho\necho '" + LIST_MARK + "'\nnvidia-smi -L"
    process = staticmethod(parse_nvidia_query)


class NvidiaTopo(_NvidiaSmiFact):
    name = "nvidia.topo"
    always_prints = True
    command = (
        "nvidia-smi topo -m\n"
        "echo ---\n"
        "for n in /sys/devices/system/node/node[0-9]*; do\n"
        "  if [ -d \"$n\" ]; then echo \"node ${n##*/node} $(cat \"$n/cpulist\")\"; fi\n"
        "done"
    )
    process = staticmethod(parse_topo_matrix)
    cpu_lists = ("gpus.*.cpus", "gpus.*.cpus_shown", "gpus.*.numa_affinity")


class NvidiaNvlink(_NvidiaSmiFact):
    name = "nvidia.nvlink"
    command = "nvidia-smi nvlink -s"
    process = staticmethod(parse_nvlink_status)
