"""The kernel's log since boot: ``kernel.xid``, the NVIDIA driver's Xid events.

The driver reports a GPU fault to the kernel log as ``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has
fallen off the bus.``  The command reads the kernel ring buffer (``dmesg``), else the journal's kernel
messages of this boot (``journalctl -k -b``: where ``dmesg`` is refused to this user, ``dmesg_restrict``),
and keeps the Xid lines only (at most :data:`MAX_EVENTS`, the newest), with how many there were, where the
log starts (a ring buffer that wrapped no longer holds the first Xids of the boot) and, when neither could
be read, why: a log that could not be read is said, never taken for one without Xids.
"""
from __future__ import annotations

import re
from typing import Any

from .base import Fact, UntrustedOutput
from ..untrusted import Unreadable, text_number

__all__ = ["KernelXid", "parse_kernel_xid", "MAX_EVENTS", "MAX_OFF_BUS", "XID_AWK"]

#: The newest Xid lines kept (a GPU in trouble can log thousands; their count is kept too).
MAX_EVENTS = 200
#: The first "has fallen off the bus" lines kept that carry no Xid (one per GPU is enough to name it).
MAX_OFF_BUS = 20

# Each reader's output goes through the same awk: "first <line>" (where the log starts), the Xid lines,
# "count N", and the reader's exit status; an error text (stderr joined) comes back as "error <text>".
XID_AWK = (
    "NR == 1 && !/^exit [0-9]+$/ { print \"first \" substr($0, 1, 40) }"
    " /NVRM: Xid/ { n++; x[n % " + str(MAX_EVENTS) + "] = $0; next }"
    # A GPU gone from the bus without an Xid: "NVRM: GPU at 0000:01:00.0 has fallen off the bus.", or the
    # driver's three-line form whose address is on the line "NVRM: The NVIDIA GPU 0000:b3:00.0" before it.
    " /NVRM: The NVIDIA GPU [0-9A-Fa-f]/ { g = $0; gn = NR }"
    " /NVRM.*fallen off the bus/ { b++; if (b <= " + str(MAX_OFF_BUS) + ") print \"offbus \" (NR - gn <= 3 ? g \" \" : \"\") $0;"
    " next }"
    " /^exit [0-9]+$/ { rc = $2; next }"
    " /^(dmesg|journalctl): |Operation not permitted|Permission denied|No journal files/ { print \"error \" $0 }"
    " END { s = n > " + str(MAX_EVENTS) + " ? n - " + str(MAX_EVENTS) + " + 1 : 1;"
    " for (i = s; i <= n; i++) print \"xid \" x[i % " + str(MAX_EVENTS) + "];"
    " print \"count \" n + 0; print \"exit \" rc + 0 }"
)


#: The PCI address of a "fallen off the bus" line: "GPU at 0000:01:00.0" or "The NVIDIA GPU 0000:b3:00.0".
_OFF_BUS = re.compile(r"(?:GPU at|NVIDIA GPU)\s+(?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\b")
_CAUSED_BY = re.compile(r"caused by previous Xid\s+([0-9]{1,4})\b")
#: An Xid line as the driver prints it: "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., ..." (a MIG instance's names it
#: after the GPU: "(PCI:0000:01:00 GPU-I:05 GPU-CI:01)"); ASCII digits only, the comma required.
_XID_LINE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)(?:\s+GPU-I:([0-9]{1,4}))?(?:\s+GPU-CI:([0-9]{1,4}))?\):"
                       r" ?([0-9]{1,6}),[ \t]*(.*)$")
_SEVERITY = re.compile(r"^\S{1,40}\s+(Nonfatal|Fatal)\b", re.I)


#: The most Xid lines one boot's log is read to hold (a GPU in trouble logs thousands an hour, not 10^12), and the
#: largest Xid number (the driver's run to the low hundreds).
XID_COUNT_MAX = 10 ** 12
XID_MAX = 100_000


def _whole(text: str, what: str, most: int) -> int:
    """A count or number awk printed, a whole number 0..``most``; else :class:`UntrustedOutput` (a count of
    10^400 lines, ``-3`` or ``NaN`` is no log's: never read as some count, never a traceback)."""
    try:
        return int(text_number(text, lo=0, hi=most, integer=True, what=what))
    except Unreadable as e:
        raise UntrustedOutput(f"kernel log: {e}") from None


def _whole_boot(t: dict[str, Any]) -> bool:
    """Whether a reader's log holds the whole boot: the journal of this boot (``-b``) does; dmesg's ring buffer
    does while its first line is from the boot's first second (else older lines rotated out)."""
    if t["source"] != "dmesg":
        return True
    m = re.match(r"\[ *([0-9]{1,12}(?:\.[0-9]{1,9})?)\]", str(t["first"] or ""))
    return m is not None and float(m.group(1)) < 1


def _readers_in_order(tries: list[dict[str, Any]]) -> None:
    """The readers as the command runs them, else :class:`UntrustedOutput`: ``dmesg``, then ``journal`` only where
    dmesg's log does not start in the boot's first second (the command's own test), or ``journal`` alone.  A
    clean journal before a dmesg holding an Xid, or a reader twice, must not be read as one clean log."""
    order = [t["source"] for t in tries]
    if order not in (["dmesg"], ["journal"], ["dmesg", "journal"]):
        raise UntrustedOutput(f"kernel log: readers {', '.join(o[:20] for o in order[:4])} (the command runs dmesg, "
                              "then the journal): damaged")
    if order == ["dmesg", "journal"]:
        m = re.match(r"\[ *([0-9]*)\.", str(tries[0]["first"] or ""))  # as the command's sed reads it
        if m and m.group(1) and int(m.group(1)[:6]) < 1:
            raise UntrustedOutput("kernel log: a journal after a dmesg log that starts at boot (the command reads "
                                  "the journal only where dmesg's wrapped): damaged")


def parse_kernel_xid(output: str) -> dict[str, Any]:
    """The command's output → ``{source, readable, error, count, first, whole_boot, events: [{pci, xid, ...}]}``.

    ``whole_boot`` says the log read holds the whole boot (the journal of this boot, or a ring buffer that did not
    wrap: where dmesg's has wrapped, the command reads the journal too).  ``readable`` is False (with ``error``: the reader's words) when no reader could read the log;
    ``count`` is every Xid line of the log, ``events`` the newest :data:`MAX_EVENTS` of them, each with the
    GPU's PCI address as the driver prints it (``0000:3b:00``, no function), the MIG instance it names (``GPU-I:05``,
    else None), the Xid number and its text.
    A line that is not valid UTF-8 keeps its Xid (``damaged`` counts them).  Output without the closing
    ``count`` line (cut short) raises :class:`UntrustedOutput`: a cut log must not read as one without Xids.
    """
    if not output.strip():
        return {"source": None, "readable": False, "error": "no dmesg or journalctl on the host", "count": 0,
                "first": None, "events": [], "damaged": 0, "whole_boot": False}
    tries: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    for raw in output.splitlines():
        word, _, rest = raw.partition(" ")
        if word == "source":
            cur = {"source": rest.strip(), "error": None, "count": None, "first": None, "events": [],
                   "damaged": 0, "exit": None, "off_bus": []}
            tries.append(cur)
        elif cur is None:
            continue
        elif word in ("first", "count", "exit") and cur[word] is not None:
            # The awk prints each once per reader: a second is no output of the command, never "last wins".
            raise UntrustedOutput(f"kernel log ({cur['source'][:20]}): a second {word!r} line: damaged")
        elif word == "first":
            cur["first"] = rest
        elif word == "error":
            cur["error"] = cur["error"] or rest.strip()
        elif word == "count":
            cur["count"] = _whole(rest, "count", XID_COUNT_MAX)
        elif word == "exit":
            cur["exit"] = _whole(rest, "exit status", 255)
        elif word == "offbus":
            # No Xid number: the address the driver names (the line itself, or the one before it that the awk joined).
            m = _OFF_BUS.search(rest)
            cur["off_bus"].append({"pci": m.group(1).lower() if m else None,
                                   "line": rest.encode("utf-8", "replace").decode("utf-8").strip()[:300]})
        elif word == "xid":
            # A MIG instance's Xid names it after the GPU: "(PCI:0000:01:00 GPU-I:05 GPU-CI:01)".
            # NVIDIA's form: the number in ASCII digits, then its comma ("79, pid=...", "149, NETIR_LINK_EVT ...");
            # a line cut after its number ("...: 7") is not read as Xid 7.
            m = _XID_LINE.search(rest)
            if m is None:
                raise UntrustedOutput(f"kernel log: an Xid line not in the driver's form: {rest.strip()[:80]!r}")
            bad = any("\udc80" <= ch <= "\udcff" for ch in rest)
            cur["damaged"] += bad
            cause = _CAUSED_BY.search(rest)
            severity = _SEVERITY.search(m.group(5))
            cur["events"].append({"pci": m.group(1).lower(), "xid": _whole(m.group(4), "Xid", XID_MAX),
                                  "mig_instance": int(m.group(2)) if m.group(2) else None,
                                  # Xid 45 "... caused by previous Xid 149": the fault it cleans up after.
                                  "caused_by": int(cause.group(1)) if cause else None,
                                  # NVLink Xids (144-150) say "Fatal" or "Nonfatal" after their unit's name.
                                  "severity": severity.group(1).capitalize() if severity else None,
                                  "text": m.group(5).encode("utf-8", "replace").decode("utf-8").strip(),
                                  "line": rest.strip()})
    if not tries:
        return {"source": None, "readable": False, "error": "not the output of kernel.xid's command", "count": 0,
                "first": None, "events": [], "damaged": 0, "whole_boot": False}
    _readers_in_order(tries)
    for t in tries:
        if t["count"] is None or t["exit"] is None:
            raise UntrustedOutput(f"kernel log ({t['source']}): the output ends before its count "
                                  "(cut short?)")
        # The awk lists the newest MAX_EVENTS Xid lines of the count it prints: any other number listed is not its
        # output (count 5 with none listed read as a log without Xids).
        if len(t["events"]) != min(t["count"], MAX_EVENTS):
            raise UntrustedOutput(f"kernel log ({t['source']}): count {t['count']} but {len(t['events'])} Xid "
                                  f"line(s) listed (the newest {MAX_EVENTS} are): damaged")
    # The first reader that read the whole boot is the answer, else the first that read the log at all (its
    # whole_boot False: a ring buffer that wrapped and no journal); else every reader's error.
    read = []
    for t in tries:
        if t["exit"] == 0 and not t["error"] and t["first"] is None:
            # Nothing at all (a container's journal does not hold the kernel's messages): not read.
            t["error"] = "no kernel message at all"
        if t["exit"] == 0 and not t["error"]:
            read.append(t)
    if read:
        whole = [t for t in read if _whole_boot(t)]
        t = (whole or read)[0]
        return {"source": t["source"], "readable": True, "error": None, "count": t["count"], "first": t["first"],
                "events": t["events"], "damaged": t["damaged"], "whole_boot": bool(whole), "off_bus": t["off_bus"]}
    why = "; ".join(f"{t['source']}: {t['error'] or 'exit ' + str(t['exit'])}" for t in tries)
    return {"source": None, "readable": False, "error": why, "count": 0, "first": None, "events": [],
            "damaged": 0}


class KernelXid(Fact):
    name = "kernel.xid"
    reads_bytes = True  # a log line not valid UTF-8 keeps its Xid, counted as damaged
    # dmesg first (the kernel's own buffer, read once: where its log starts is the awk's "first" line); this
    # boot's journal too where dmesg is refused or its ring buffer wrapped (its first line is not from the boot's
    # first second).
    command = (
        "x=\n"
        "if command -v dmesg >/dev/null 2>&1; then\n"
        "  echo 'source dmesg'\n"
        f"  x=$({{ dmesg 2>&1; echo \"exit $?\"; }} | awk '{XID_AWK}')\n"
        "  printf '%s\\n' \"$x\"\n"
        "fi\n"
        "t=$(printf '%s\\n' \"$x\" | sed -n 's/^first \\[ *\\([0-9]*\\)\\..*/\\1/p')\n"
        "if [ \"${t:-1}\" -ge 1 ] && command -v journalctl >/dev/null 2>&1; then\n"
        "  echo 'source journal'\n"
        f"  {{ journalctl -k -b -q --no-pager 2>&1; echo \"exit $?\"; }} | awk '{XID_AWK}'\n"
        "fi"
    )
    process = staticmethod(parse_kernel_xid)
