"""The acceptance run on one host, over a transport (:mod:`bringup.ssh.connection`): the preflight reads, the probe,
``dcgmi diag``.  Every command is bounded on the host by ``timeout``; nothing is left there (the probe is
sent on python3's stdin, never written to a file).

The GPU load (the probe, ``dcgmi diag``) carries a tag of its run in its environment (:data:`TAG_ENV`), so that
a run stopped by a signal ends it on the host at once (:func:`stop_load`, over a round trip of its own):
``timeout(1)`` puts the load in a process group of its own, which neither a closed SSH channel nor the ending of
the script's group reaches, and it would load the GPUs until its own bound.
"""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from importlib import resources as ilr

from ..errors import said
from ..ssh.command import sh
from ..ssh.script import KILLED, TIMED_OUT, batch, end_left, split
from ..untrusted import Unreadable, loads

__all__ = ["Preflight", "preflight", "run_probe", "run_dcgmi", "DCGM_TIMEOUT_S", "probe_budget_s", "TAG_ENV",
           "new_tag", "stop_load", "Stopped"]

#: Seconds ``dcgmi diag -r N`` may take (NVIDIA's guide: level 1 seconds, 2 about 2 minutes, 3 about 30).
DCGM_TIMEOUT_S = {1: 300, 2: 900, 3: 3600}
_EOF = "BRINGUP_ACCEPT_PROBE_EOF"

#: Seconds between the two reads of Triton's metrics: traffic slower than one request a second must show too.
WINDOW_S = 3
#: The most of one read of Triton's metrics taken (bytes; Triton's page is tens of kilobytes) and the seconds one
#: read may take whole: a port that floods or drips is "unreachable" within them, on the host.
METRICS_MAX = 4 << 20
METRICS_DEADLINE_S = 5
_METRICS_READ = """import sys, time, urllib.request
WINDOW_S = """ + str(WINDOW_S) + """
MAX = """ + str(METRICS_MAX) + """
def get():
    try:
        url = "http://127.0.0.1:%d/metrics" % int(sys.argv[1])
        end = time.time() + """ + str(METRICS_DEADLINE_S) + """
        r = urllib.request.urlopen(url, timeout=2)
        read = getattr(r, "read1", r.read)
        got, n = [], 0
        while n <= MAX:
            if time.time() > end:
                return "# bringup: unreachable: the answer did not come whole within """ + str(METRICS_DEADLINE_S) + """ s"
            c = read(65536)
            if not c:
                return b"".join(got).decode("utf-8", "replace")
            got.append(c)
            n += len(c)
        return "# bringup: unreachable: the answer is larger than %d bytes" % MAX
    except Exception as e:
        return "# bringup: unreachable " + type(e).__name__
a = get(); time.sleep(WINDOW_S); b = get()
sys.stdout.write(a + "\\n# bringup: second read\\n" + b)
"""


@dataclass
class Preflight:
    """What the host says before anything is loaded."""

    python: bool
    dcgmi: str  # the path of dcgmi, "" when absent
    apps: str
    metrics_first: str
    metrics_second: str
    #: Why the compute apps were not read ("" when they were): then whether the GPUs are in use cannot be told.
    apps_problem: str = ""


#: Seconds each read of the preflight may take on the host.
PREFLIGHT_S = 30


def preflight(transport, metrics_port: int) -> Preflight:
    """One round trip: python3 and dcgmi present, the GPUs' compute processes, Triton's metrics twice :data:`WINDOW_S` apart."""
    steps = [
        ("python", "command -v python3"),
        ("dcgmi", "command -v dcgmi || true"),
        # Bounded by batch's time limit alone (PREFLIGHT_S), in the read's own process group, which is ended as the
        # read ends: no timeout(1) of their own (`timeout --foreground` is unknown to busybox and coreutils < 8.13,
        # where the usage error read as "no GPU in use" and the preflight refused nothing).
        ("apps", "nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader 2>&1"),
        ("metrics", sh("python3 - %s <<'BRINGUP_METRICS_EOF'\n", int(metrics_port))
         + _METRICS_READ
         + "BRINGUP_METRICS_EOF\n"),
    ]
    # Each read bounded (a compute-apps list or the metrics twice are kilobytes): a flood is cut, never read; each
    # under PREFLIGHT_S, and a child it left holding its output (nvidia-smi's helper) ended as it ends, not waited for.
    bound = 2 * METRICS_MAX + 4096
    script, token = batch(steps, section_max=bound, time_limit_s=PREFLIGHT_S)
    res = transport.run_script(script)
    got = {s.key: s for s in split(res.stdout, token, [k for k, _ in steps], section_max=bound)}
    text = got["metrics"].output if "metrics" in got else ""
    first, _, second = text.partition("\n# bringup: second read\n")
    apps = got.get("apps")
    return Preflight(python=bool("python" in got and got["python"].rc == 0 and got["python"].output.strip()),
                     dcgmi=(got["dcgmi"].output.strip() if "dcgmi" in got else ""),
                     apps=apps.output if apps is not None else "",
                     metrics_first=first, metrics_second=second, apps_problem=_apps_problem(apps))


def _apps_problem(apps) -> str:
    """Why nvidia-smi's list of compute processes was not read ("" when it was): a read that failed or ran out of
    time read as an empty list, "no GPU in use", and the GPUs were loaded under whoever used them."""
    if apps is None or apps.rc is None:
        return "did not come back (the host's script stopped first)"
    if apps.rc in (TIMED_OUT, KILLED):
        return f"did not answer within {PREFLIGHT_S} s"
    if apps.rc == 127:
        return ""  # no nvidia-smi at all: no NVIDIA userland to compute with; the probe then says what it finds
    if apps.rc != 0:
        return f"failed (exit {apps.rc}: {said(apps.output, 120) or 'no output'})"
    return ""


#: The most of the probe's or dcgmi's output read back (bytes, stdout and stderr together): the probe prints a
#: few kilobytes, ``dcgmi diag -r 3 -j`` some hundred; a host that prints more (a flood) is cut there, on the
#: host, and its output is named unreadable.
OUTPUT_MAX = 8 << 20


def _capped(command: str, heredoc: str = "", tag: str | None = None) -> str:
    """``command`` (its stdin ``heredoc``, if any: a here-document's lines) with stdout and stderr cut after
    :data:`OUTPUT_MAX` + 1 bytes by ``head -c`` (the command ends by SIGPIPE there); the script's exit status
    is the command's own, carried through fd 3 (the pipe's would be head's).  ``command`` starts with
    ``timeout`` (the load's own process group): once it has ended, what it left in that group is ended too, so
    that a child holding the output (a helper dcgmi or nvidia-smi left behind) never holds the round trip; given
    the load's ``tag`` (:func:`_tagged`), what carries it and left that group (``setsid``) is ended too."""
    first, _, body = heredoc.partition("\n")
    return (f"{{ _r=$( {{ {{ {command} 2>&1 3>&- {first} &\n{body}{chr(10) if heredoc else ''}"
            f"_c=$!; wait \"$_c\"; _s=$?; {end_left('$_c', tag, TAG_ENV)}; echo \"$_s\" >&3; }} | head -c {OUTPUT_MAX + 1} >&4; }} "
            f"3>&1 ); }} 4>&1; exit \"${{_r:-141}}\"\n")


def cut(stdout: str) -> bool:
    """Whether an output read through :func:`_capped` was cut at :data:`OUTPUT_MAX`."""
    return len(stdout) > OUTPUT_MAX // 4 and len(stdout.encode("utf-8", "surrogateescape")) > OUTPUT_MAX


def probe_source() -> str:
    text = ilr.files("bringup.acceptance").joinpath("probe.py").read_text()
    assert _EOF not in text
    return text


def probe_budget_s(seconds: float, watchdog: float, gpus: int) -> int:
    """The probe's hard bound on the host: the load, plus each GPU's and pair's copies at their watchdog's pace
    (they take well under a second each on a healthy GPU)."""
    n = max(1, gpus)
    return int(60 + seconds + 2 * watchdog + 10 * n + 2 * n * (n - 1) // 2)


def run_probe(transport, *, seconds: float, watchdog: float = 20.0, repeats: int = 5, size_mib: int = 256,
              gpus: int = 1, tag: str | None = None) -> dict:
    """The probe on the host under ``timeout``; its JSON document, or one with a named ``error``.  ``tag``
    (:func:`new_tag`): what :func:`stop_load` finds it by."""
    budget = probe_budget_s(seconds, watchdog, gpus)
    cmd = _tagged(tag) + sh("timeout -k 5 %s python3 - --seconds %s --watchdog %s --repeats %s --size-mib %s",
                            budget, f"{seconds:g}", f"{watchdog:g}", repeats, size_mib)
    with transport.limited(budget + 30):
        res = transport.run_script(_capped(cmd, f"<<'{_EOF}'\n{probe_source()}{_EOF}", tag))
    if cut(res.stdout):
        return {"probe": 1, "error": f"the probe printed more than {OUTPUT_MAX >> 20} MiB: the host's output is "
                "unreadable (cut there)", "gpus": [], "pairs": [], "load": None}
    return probe_result(res.rc, res.stdout, res.stderr, budget)


def _shape(doc: dict) -> str | None:
    """What in the probe's document is not of the probe's own shape (None: all is): the judge reads gpus and
    pairs as lists of objects, load as an object, error as text."""
    for key in ("gpus", "pairs"):
        v = doc.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, dict) for x in v)):
            return f"{key} is not a list of objects"
    load = doc.get("load")
    if load is not None and not (isinstance(load, dict) and isinstance(load.get("samples") or [], list)
                                 and isinstance(load.get("errors") or {}, dict)):
        return "load is not the probe's object"
    if doc.get("error") is not None and not isinstance(doc["error"], str):
        return "error is not text"
    return None


def probe_result(rc: int, stdout: str, stderr: str, budget: int) -> dict:
    """The probe's document from what the host returned; a run that printed none is a named error."""
    for ln in reversed(stdout.splitlines()):
        if ln.startswith("{"):
            try:
                doc = loads(ln, what="the probe's JSON", unique=True)
            except Unreadable as e:
                # NaN, 100,000 digits or '[' nested without end: the host's answer, never read as figures.
                return {"probe": 1, "error": f"{e}: the host's output is unreadable", "gpus": [], "pairs": [],
                        "load": None}
            if isinstance(doc, dict) and "probe" in doc:
                bad = _shape(doc)
                if bad:
                    return {"probe": 1, "error": f"the probe's JSON: {bad}: the host's output is unreadable",
                            "gpus": [], "pairs": [], "load": None}
                return doc
            break
    if rc in (124, 137):
        why = f"the probe did not finish within {budget} s and was killed (timeout): the GPU or driver hangs"
    elif rc == 127:
        why = "python3 not found on the host: the probe needs Python 3 (apt-get install python3)"
    else:
        said = " ".join((stderr or stdout).split())[-300:]
        why = f"the probe printed no result (exit {rc}): {said or 'nothing'}"
    return {"probe": 1, "error": why, "gpus": [], "pairs": [], "load": None}


def run_dcgmi(transport, level: int, tag: str | None = None) -> tuple[int, str, str]:
    """``dcgmi diag -r LEVEL -j`` under ``timeout``; ``(rc, stdout, stderr)``."""
    limit = DCGM_TIMEOUT_S[level]
    with transport.limited(limit + 30):
        res = transport.run_script(_capped(_tagged(tag) + sh("timeout -k 10 %s dcgmi diag -r %s -j", limit, level), tag=tag))
    if cut(res.stdout):
        return res.rc, "", f"dcgmi printed more than {OUTPUT_MAX >> 20} MiB: its output is unreadable (cut there)"
    return res.rc, res.stdout, res.stderr


#: The environment variable whose value tags one accept run's load on the host.
TAG_ENV = "BRINGUP_ACCEPT_RUN"
_TAG = re.compile(r"^[0-9a-f]{16,64}$")
#: Seconds the round trip that stops a load may take.
STOP_S = 30


def new_tag() -> str:
    return secrets.token_hex(12)


def _tagged(tag: str | None) -> str:
    if tag is None:
        return ""
    if not _TAG.match(tag):
        raise ValueError("an accept run's tag is hex")
    return f"{TAG_ENV}={tag} "


@dataclass
class Stopped:
    """What :func:`stop_load` did on the host: processes of the load killed, and those still there after."""

    killed: int
    left: int


_STOP = """t=%s
found() { grep -lzx -e "$t" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; }
n=0
for p in $(found); do
  g=$(ps -o pgid= -p "$p" 2>/dev/null | tr -d ' ')
  case "$g" in ''|*[!0-9]*) ;; *) [ "$g" -gt 1 ] && kill -KILL -- "-$g" 2>/dev/null ;; esac
  kill -KILL "$p" 2>/dev/null && n=$((n+1))
done
i=0; left=$(found | wc -l)
while [ "$left" -gt 0 ] && [ $i -lt 20 ]; do sleep 0.25; i=$((i+1)); left=$(found | wc -l); done
echo "bringup-stopped $n $left"
"""


def stop_load(transport, tag: str) -> Stopped:
    """Kill, on the host, every process of the load tagged ``tag`` and its process group (SIGKILL: the GPU is
    freed at once); what was killed and what is still there, read on the host again after the kill (a zombie
    has no environment: it is gone).  Raises :class:`~bringup.errors.Unreachable` when the host cannot be asked,
    ValueError when it answers something else."""
    if not _TAG.match(tag):
        raise ValueError("an accept run's tag is hex")
    with transport.limited(STOP_S):
        res = transport.run_script(sh(_STOP, f"{TAG_ENV}={tag}"))
    for ln in reversed(res.stdout.splitlines()):
        w = ln.split()
        if len(w) == 3 and w[0] == "bringup-stopped" and w[1].isdigit() and w[2].isdigit() and len(ln) < 64:
            return Stopped(int(w[1]), int(w[2]))
    raise ValueError(f"the host's answer was not readable (exit {res.rc})")
