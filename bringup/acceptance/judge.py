"""The probe's JSON (:mod:`.probe`) against the limits (:mod:`.limits`): checklist lines of area ``acceptance``.

Pure: the probe's document, the host's facts (``nvidia.query``: each GPU's PCIe max generation and width and
architecture; ``nvidia.smi``: names and memory, for the class's datasheet figure; ``nvidia.topo``: NVLink
counts between GPUs) and its variables (``gpu_profiles``, ``accept_thresholds``) in, lines out.

    lines = judge(doc, facts, vars)
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Mapping

from ..checks import Check, line
from ..facts.nvidia_health import GPU_TEMPERATURE_RANGE_C
from ..facts.pci import normalize_pci_address
from ..process import command
from ..untrusted import Unreadable, number, text_number
from .limits import CLOCK_REASONS, THROTTLE_FAIL, Thresholds, nvlink_gbs, pcie_gbs, thresholds

__all__ = ["AREA", "judge", "probe_error_line", "bus_key", "reasons_text"]

AREA = "acceptance"
_XID = ("look for Xid errors (dmesg | grep -i xid) and at nvidia-smi -q; drain the host, reset or reseat the GPU, "
        "RMA it if it recurs")


def bus_key(bus: Any) -> str:
    """A bus id in any spelling (``00000000:18:00.0``, ``0000:18:00.0``) as one key (``0000:18:00.0``)."""
    text = str(bus or "").strip()
    return normalize_pci_address(text) or text.lower()


def _subject(bus: Any) -> str:
    """``GPU <bus id as nvidia-smi prints it>``."""
    k = bus_key(bus)
    dom, _, rest = k.partition(":")
    try:
        return f"GPU {int(dom, 16):08X}:{rest.upper()}"
    except ValueError:
        return f"GPU {bus}"


#: The largest copy rate read from the probe (GB/s): HBM3e moves about 8,000, NVLink 5 1,800 a GPU; a figure
#: above this (1e308, Infinity read as a float) was not measured.
RATE_MAX = 100_000.0
#: The probe's own bounds on --repeats (probe.py's main).
REPEATS_MAX = 100


def _repeats(doc: Mapping[str, Any]) -> str:
    """How the figures were taken: ``median of 5``; where the probe's ``repeats`` is absent or no whole number it
    takes (1..100: 10^400, 0, NaN, text), says so, never "median of 0" (never a traceback)."""
    try:
        return f"median of {int(number(doc.get('repeats'), lo=1, hi=REPEATS_MAX, integer=True, what='repeats'))}"
    except Unreadable as e:
        return f"runs unknown: {e}"


def _status(ratio: float, warn: float, fail: float) -> str:
    return "FAIL" if ratio < fail else "WARN" if ratio < warn else "PASS"


def reasons_text(mask: int) -> str:
    names = [n for bit, n in CLOCK_REASONS.items() if mask & bit]
    return ", ".join(names) or "none"


def probe_error_line(error: str) -> Check:
    """The probe's own error (no driver, CUDA refusing, a copy past its watchdog) as one FAIL line."""
    if "not found" in error and "libcuda" in error:
        fix = "install the NVIDIA driver: " + command("provision --roles nvidia_driver")
    elif "watchdog" in error:
        fix = "a copy hung: " + _XID
    elif "sees no GPU" in error or "CUDA_ERROR_NO_DEVICE" in error:
        fix = "nvidia-smi and dmesg: is the GPU bound to the nvidia driver (lspci -k), MIG or CUDA_VISIBLE_DEVICES?"
    else:
        fix = _XID
    return line(AREA, "acceptance probe", "FAIL", error, fix)


def _gpu_facts(facts: Mapping[str, Any]) -> tuple[dict[str, dict], dict[str, dict]]:
    query = {bus_key(g.get("bus_id")): g for g in (facts.get("nvidia.query") or {}).get("gpus") or []
             if isinstance(g, dict)}
    smi = {bus_key(g.get("pci_bus_id") or g.get("pci_address")): g for g in facts.get("nvidia.smi") or []
           if isinstance(g, dict)}
    return query, smi


def _rate_line(name: str, subject: str, value: Any, limit: float | None, what: str, warn: float, fail: float,
               fix: str, runs: str, measured: str = "") -> Check:
    """A measured rate against its limit; ``measured`` says what the figure is where "GB/s" alone does not
    (``read+write (2061.8 GB/s copied)``)."""
    if value is None:
        return line(AREA, name, "FAIL", "no figure: the probe measured nothing", _XID, subject=subject)
    try:
        value = number(value, lo=0, hi=RATE_MAX, what="the probe's figure")
    except Unreadable as e:
        # NaN, Infinity, 1e308, -5 or "fast" is no measurement: not checked, never held against a limit.
        return line(AREA, name, "WARN", f"not checked: {e} (unreadable)",
                    "run the acceptance again; the probe's JSON in the saved result shows what the host printed",
                    subject=subject)
    figure = f"{value:.1f} GB/s" + (f" {measured}" if measured else "")
    if not limit:
        return line(AREA, name, "WARN", f"{figure} ({runs}); no limit known: {what}",
                    "judge the figure by hand against the part's datasheet, or add the part to bringup's GPU "
                    "profiles (gpu_profiles with memory_bandwidth) so it is held against one",
                    subject=subject, value=round(float(value), 1), unit="GB/s")
    ratio = float(value) / limit
    status = _status(ratio, warn, fail)
    return line(AREA, name, status, f"{figure} ({runs}), {ratio:.0%} of {what} {limit:.1f} GB/s "
                f"(WARN below {warn:.0%}, FAIL below {fail:.0%})", "" if status == "PASS" else fix,
                subject=subject, value=round(float(value), 1), limit=round(limit, 1), unit="GB/s")


def _link(q: dict | None) -> tuple[float | None, str]:
    gen, width = (q or {}).get("pcie_gen_max"), (q or {}).get("pcie_width_max")
    gbs = pcie_gbs(gen, width)
    if gbs is None:
        return None, "the facts hold no PCIe max generation and width for this GPU (nvidia-smi -q)"
    return gbs, f"PCIe Gen{gen} x{width}'s"


def _pair_key(p: Mapping[str, Any]) -> tuple:
    return tuple(bus_key(p.get(f"{e}_bus_id")) if p.get(f"{e}_bus_id") else repr(p.get(e)) for e in ("src", "dst"))


def gpu_lines(doc: Mapping[str, Any], facts: Mapping[str, Any], vars: Mapping[str, Any],
              th: Thresholds) -> list[Check]:
    """H2D, D2H and device memory lines of every GPU the probe measured."""
    from ..errors import InputError
    from ..hardware.gpu_profiles import memory_bandwidth, table

    query, smi = _gpu_facts(facts)
    try:
        profiles = table(vars)
    except InputError:
        profiles = {}  # the checklist's GPU lines name a bad gpu_profiles; here the figure is just unknown
    runs = _repeats(doc)
    out: list[Check] = []
    # CUDA lists each device once: a bus id twice in the probe's answer is damage, and which entry's figures are
    # the GPU's is not known (one PASS and one FAIL line of one GPU, or another GPU's figures under its id).
    seen = Counter(bus_key(g.get("bus_id")) for g in doc.get("gpus") or [] if g.get("bus_id"))
    said: set[str] = set()
    for g in doc.get("gpus") or []:
        key = bus_key(g.get("bus_id"))
        subject = _subject(g.get("bus_id")) if g.get("bus_id") else f"GPU {g.get('index', '?')}"
        if g.get("bus_id") and seen.get(key, 0) > 1:
            if key not in said:
                said.add(key)
                out.append(line(AREA, "copies", "WARN", f"not checked: the probe's answer lists this GPU "
                                f"{seen[key]} times (damaged: which figures are its own is not known)",
                                "run the acceptance again; the probe's JSON in the saved result shows what the host "
                                "printed", subject=subject))
            continue
        if g.get("error"):
            out.append(line(AREA, "copies", "FAIL", f"GPU {g.get('index', '?')} ({g.get('name', '?')}): {g['error']}",
                            _XID, subject=subject))
            continue
        if doc.get("error") and not any(k in g for k in ("h2d_gbs", "d2h_gbs", "d2d_gbs")):
            continue  # the probe stopped on this GPU: its error line says why
        limit, what = _link(query.get(key))
        pcie_fix = ("the link moves less than it trained for: nvidia-smi -q -d PCI while copying shows the current "
                    "generation and width; reseat the GPU or its riser, set the slot to its full generation and "
                    "width in the BIOS, check lspci -vv LnkSta")
        out.append(_rate_line("host-to-device bandwidth", subject, g.get("h2d_gbs"), limit, what, th.pcie_warn,
                              th.pcie_fail, pcie_fix, runs))
        out.append(_rate_line("device-to-host bandwidth", subject, g.get("d2h_gbs"), limit, what, th.pcie_warn,
                              th.pcie_fail, pcie_fix, runs))
        d2d = g.get("d2d_gbs")
        s = smi.get(key) or {"name": g.get("name")}
        found = memory_bandwidth(profiles, {**s, "name": s.get("name") or g.get("name")})
        rw = 2 * d2d if isinstance(d2d, (int, float)) and not isinstance(d2d, bool) and abs(d2d) <= RATE_MAX \
            else d2d
        if found is None:
            what = (f"no datasheet figure for {g.get('name', '?')}: add memory_bandwidth to its profile under "
                    "gpu_profiles")
            sheet = None
        else:
            sheet, source, pname = found
            what = f"the {pname} datasheet's"
        out.append(_rate_line("device memory bandwidth", subject, rw, sheet, what, th.memory_warn, th.memory_fail,
                              "memory moves slower than the part's: check clocks (nvidia-smi -q -d CLOCK,PERFORMANCE), "
                              "ECC and remapped rows (nvidia-smi -q -d ECC,ROW_REMAPPER); " + _XID, runs,
                              f"read+write ({d2d:.1f} GB/s copied)" if isinstance(d2d, (int, float))
                              and not isinstance(d2d, bool) and abs(d2d) <= RATE_MAX else ""))
    return out


def _nv_links(topo: Mapping[str, Any], a: Any, b: Any) -> int:
    """NVLink links between nvidia-smi's GPUs ``a`` and ``b`` in ``topo -m`` (0: none or unknown)."""
    cell = str(((topo or {}).get("matrix") or {}).get(f"GPU{a}", {}).get(f"GPU{b}") or "")
    # ASCII digits, a few (a saved facts file's cell too): 'NV²' and NV of 5,000 digits made int() raise.
    m = re.fullmatch(r"NV([0-9]{1,3})", cell)
    return int(m.group(1)) if m else 0


def pair_lines(doc: Mapping[str, Any], facts: Mapping[str, Any], th: Thresholds) -> list[Check]:
    """One line per GPU pair: peer-to-peer copy rate against NVLink (the topology's NV# links) or PCIe."""
    query, smi = _gpu_facts(facts)
    smi_index = {k: g.get("index") for k, g in smi.items() if g.get("index") is not None}
    topo = facts.get("nvidia.topo") or {}
    runs = _repeats(doc)
    out: list[Check] = []
    pairs = list(doc.get("pairs") or [])
    # A pair listed more than once is damage, never judged twice (one PASS and one FAIL line of one pair).
    seen, said = Counter(_pair_key(p) for p in pairs), set()
    for p in pairs:
        a, b = p.get("src"), p.get("dst")
        subject = _subject(p.get("src_bus_id")) if p.get("src_bus_id") else f"GPU {a}"
        name = f"P2P to {_subject(p.get('dst_bus_id'))}" if p.get("dst_bus_id") else f"P2P to GPU {b}"
        key = _pair_key(p)
        if seen[key] > 1:
            if key not in said:
                said.add(key)
                out.append(line(AREA, name, "WARN", f"not checked: the probe's answer lists this pair "
                                f"{seen[key]} times (damaged: which figure is its own is not known)",
                                "run the acceptance again; the probe's JSON in the saved result shows what the host "
                                "printed", subject=subject))
            continue
        if p.get("error"):
            out.append(line(AREA, name, "FAIL", f"GPU {a} -> GPU {b}: {p['error']}", _XID, subject=subject))
            continue
        qa, qb = query.get(bus_key(p.get("src_bus_id"))), query.get(bus_key(p.get("dst_bus_id")))
        # topo -m names GPUs by nvidia-smi's index: found by bus id, whatever order CUDA counted them in.
        ia, ib = (smi_index.get(bus_key(p.get(k))) for k in ("src_bus_id", "dst_bus_id"))
        links = _nv_links(topo, ia, ib) if ia is not None and ib is not None else 0
        if links:
            arch = (qa or qb or {}).get("product_architecture")
            limit = nvlink_gbs((qa or qb or {}).get("product_name"), arch, links)
            what = f"{links} NVLink link(s)' ({arch or 'architecture unknown'})"
            warn, fail = th.nvlink_warn, th.nvlink_fail
            fix = ("NVLink moves less than its links should: nvidia-smi nvlink -s (links down or slow), "
                   "nvidia-smi -q (Fabric state); on an NVSwitch board, nvidia-fabricmanager running")
            if not p.get("peer_access"):
                out.append(line(AREA, name, "FAIL", f"GPU {a} -> GPU {b}: {links} NVLink link(s) in the topology, "
                                "but the driver refuses peer access (cuDeviceCanAccessPeer 0)", fix, subject=subject))
                continue
        else:
            la, lb = _link(qa)[0], _link(qb)[0]
            limit = min(x for x in (la, lb) if x) if (la or lb) else None
            what = "the slower GPU's PCIe link"
            warn, fail = th.pcie_p2p_warn, th.pcie_p2p_fail
            fix = ("peer copies over PCIe are slow: nvidia-smi topo -m shows the path (SYS/NODE cross the CPU); "
                   "ACS on the switches (lspci -vvv ACSCtl) forces them through the root complex; IOMMU passthrough")
            if not p.get("peer_access"):
                what += " (no peer access: copies staged through host memory)"
        out.append(_rate_line(name, subject, p.get("gbs"), limit, what, warn, fail, fix, runs))
    return out


def _hex(text: Any) -> int | None:
    """nvidia-smi's clock event reasons (``0x0000000000000040``): a 64-bit mask, else None (unreadable)."""
    t = str(text).strip()
    if not re.fullmatch(r"(0[xX])?[0-9A-Fa-f]{1,16}", t):
        return None
    return int(t, 16)


#: What nvidia-smi can print for a GPU's temperature (°C, the bounds of ``nvidia -q``'s GPU Current Temp: NVML's is
#: unsigned, so ``-5`` is no reading, and a GPU under load at 0 °C is a sensor reading nothing) and SM clock (MHz);
#: outside: unreadable, named on the line.
_RANGES = {"temperature_c": tuple(map(float, GPU_TEMPERATURE_RANGE_C)), "sm_mhz": (0.0, 10_000.0)}


def _num(text: Any, key: str) -> float | None:
    lo, hi = _RANGES[key]
    try:
        return float(text_number(text, lo=lo, hi=hi, what=key))
    except Unreadable:
        return None


def load_lines(doc: Mapping[str, Any]) -> list[Check]:
    """Per GPU: the clock event reasons and temperature nvidia-smi showed during the load; a hardware, thermal
    or power-brake slowdown under load FAILs."""
    load = doc.get("load")
    name = "clocks under load"
    measured = [g for g in doc.get("gpus") or [] if not g.get("error")
                and (not doc.get("error") or any(k in g for k in ("h2d_gbs", "d2h_gbs", "d2d_gbs")))]
    # A GPU the answer lists twice (gpu_lines names it) has its readings under load judged once, by its bus id.
    firsts: dict[str, dict] = {}
    measured = [g for g in measured if not g.get("bus_id") or firsts.setdefault(bus_key(g.get("bus_id")), g) is g]
    out: list[Check] = []
    for g in measured:
        # An entry without its index cannot be matched to its load errors: named, never left out.
        if "index" not in g or not isinstance(g.get("index"), int) or isinstance(g.get("index"), bool):
            out.append(line(AREA, name, "WARN", f"not checked: the probe's entry for this GPU has no index "
                            f"({g.get('index')!r}): unreadable", "run the acceptance again; the probe's JSON in the "
                            "saved result shows what the host printed",
                            subject=_subject(g.get("bus_id")) if g.get("bus_id") else "GPU ?"))
    if not isinstance(load, dict):
        why = ("the probe stopped before the load" if doc.get("error")
               else "the probe's document holds no load readings (unreadable)")
        return out + [line(AREA, name, "WARN", f"not checked: {why}",
                           "run the acceptance again; the probe's JSON in the saved result shows what the host printed",
                           subject=_subject(g["bus_id"]) if g.get("bus_id") else f"GPU {g.get('index', '?')}")
                      for g in measured if "index" in g and isinstance(g.get("index"), int)
                      and not isinstance(g.get("index"), bool)]
    gpus = {str(g.get("index")): g for g in measured if isinstance(g.get("index"), int)
            and not isinstance(g.get("index"), bool)}
    errors = load.get("errors") or {}
    samples = [s for s in load.get("samples") or [] if isinstance(s, dict)]
    read = [s for s in samples if s.get("gpus") and isinstance(s["gpus"], list)]
    try:  # the load's length as the probe wrote it: shown only, yet never "NaN s" or "1e+308 s"
        secs = f"{number(load.get('seconds'), lo=0, hi=86_400, what='seconds'):g} s"
    except Unreadable:
        secs = f"an unreadable time ({str(load.get('seconds'))[:20]!r})"
    if not read:
        why = next((s.get("error") for s in samples if s.get("error")), "no sample")
        for idx, g in gpus.items():
            out.append(line(AREA, name, "WARN", f"not read during {secs} of copies: nvidia-smi: {why}",
                            "nvidia-smi must run on the host (it comes with the driver)",
                            subject=_subject(g.get("bus_id"))))
    # Each reading under its GPU's bus once: matched per GPU (every sample's rows read again for every GPU, each bus
    # id normalised each time), 1,000 GPU entries of a host's 443 KB answer took 10 s, 18,000 (within the 8 MiB
    # read) hours.
    by_bus: dict[str, list[dict]] = {}
    for s in read:
        for r in s["gpus"]:
            if isinstance(r, dict):
                by_bus.setdefault(bus_key(r.get("bus_id")), []).append(r)
    for idx, g in gpus.items():
        subject = _subject(g.get("bus_id"))
        if idx in errors:
            out.append(line(AREA, "copies under load", "FAIL", f"GPU {idx}: {errors[idx]}", _XID, subject=subject))
        if not read:
            continue
        rows = by_bus.get(bus_key(g.get("bus_id")), [])
        if not rows:
            out.append(line(AREA, name, "WARN", f"nvidia-smi did not list this GPU during the load", _XID,
                            subject=subject))
            continue
        masks = [_hex(r.get("reasons")) for r in rows]
        temps = [t for t in (_num(r.get("temperature_c"), "temperature_c") for r in rows) if t is not None]
        clocks = [c for c in (_num(r.get("sm_mhz"), "sm_mhz") for r in rows) if c is not None]
        seen_mask = 0
        for m in masks:
            seen_mask |= m or 0
        bad = seen_mask & THROTTLE_FAIL
        where = (f"{len(rows)} read(s) over {secs} of copies on every GPU; temperature up to "
                 f"{max(temps):.0f} °C" if temps else f"{len(rows)} read(s) over {secs}; temperature not shown")
        # A temperature no GPU prints (-5, NaN, 1e308) is no reading: named, never shown as a degree.
        odd = next((r.get("temperature_c") for r in rows if r.get("temperature_c") not in (None, "", "[N/A]", "N/A")
                    and _num(r.get("temperature_c"), "temperature_c") is None), None)
        where += f" (temperature {str(odd)[:20]!r} is no reading: not checked)" if odd is not None else ""
        where += f", SM clock {min(clocks):.0f}-{max(clocks):.0f} MHz" if clocks else ""
        if bad:
            out.append(line(AREA, name, "FAIL", f"{reasons_text(bad)} active under load ({where})",
                            "the GPU slows itself down: check cooling (fans, airflow, inlet temperature), power "
                            "(PSUs, cables, power brake from the BMC) and nvidia-smi -q -d PERFORMANCE; " + _XID,
                            subject=subject, value=max(temps) if temps else None, unit="°C" if temps else ""))
        elif any(m is None for m in masks):
            out.append(line(AREA, name, "WARN", f"clock event reasons not readable ({rows[0].get('reasons')!r}; "
                            f"{where})", "update the driver: its nvidia-smi does not show clock event reasons",
                            subject=subject))
        else:
            other = reasons_text(seen_mask & ~0x1) if seen_mask & ~0x1 else ""
            out.append(line(AREA, name, "PASS", f"no slowdown ({where})" + (f"; also seen: {other}" if other else ""),
                            subject=subject, value=max(temps) if temps else None, unit="°C" if temps else ""))
    return out


def coverage_lines(doc: Mapping[str, Any], facts: Mapping[str, Any]) -> list[Check]:
    """The GPUs nvidia-smi lists (``nvidia.smi``) against those the probe measured, by bus id: a GPU CUDA did
    not reach (CUDA_VISIBLE_DEVICES, a GPU CUDA cannot open) FAILs by name, never passes unmentioned.  A probe
    that stopped with its own error before measuring any GPU has that error's line alone."""
    listed = [g for g in facts.get("nvidia.smi") or [] if isinstance(g, dict)]
    measured = {bus_key(g.get("bus_id")) for g in doc.get("gpus") or [] if g.get("bus_id")}
    if doc.get("error") and not doc.get("gpus") or "nvidia.smi" not in facts:
        return []  # the error's line says why; facts without nvidia.smi (a test's, a saved result's): no count
    name = "GPUs measured"
    if not listed:
        return [line(AREA, name, "WARN", "not checked: the facts list no GPU (nvidia-smi --query-gpu), so the "
                     "probe's GPUs are not held against the host's", "nvidia-smi on the host: does it list the GPUs?")]
    missing = [g for g in listed if bus_key(g.get("pci_bus_id") or g.get("pci_address")) not in measured]
    if not missing:
        return []
    names = ", ".join(f"GPU {g.get('index', '?')} {g.get('pci_bus_id') or g.get('pci_address') or '(no bus id)'}"
                      for g in missing)
    return [line(AREA, name, "FAIL", f"probe measured {len(listed) - len(missing)} of {len(listed)} GPUs "
                 f"(missing: {names}); their copies and pairs are not measured",
                 "CUDA did not reach them: is CUDA_VISIBLE_DEVICES set for the login shell, is a GPU in MIG mode "
                 "or held by another process (nvidia-smi), and dmesg for Xid errors; " + _XID)]


def judge(doc: Mapping[str, Any], facts: Mapping[str, Any], vars: Mapping[str, Any]) -> list[Check]:
    """Every acceptance line of one host from the probe's document.  ``vars``'s ``accept_thresholds`` are
    checked first (:func:`~.limits.thresholds` raises :class:`~bringup.errors.InputError` on bad values)."""
    th = thresholds(vars)
    out: list[Check] = []
    if doc.get("error"):
        out.append(probe_error_line(str(doc["error"])))
    out += coverage_lines(doc, facts)
    out += gpu_lines(doc, facts, vars, th)
    out += pair_lines(doc, facts, th)
    out += load_lines(doc)
    if not out:
        out.append(line(AREA, "acceptance probe", "FAIL", "the probe measured no GPU", _XID))
    return out
