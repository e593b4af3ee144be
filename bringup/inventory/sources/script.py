"""Inventory scripts (``--list`` prints JSON with ``_meta.hostvars``), and the JSON or YAML that
``ansible-inventory --list`` writes, which has the same shape: so any inventory plugin an operator uses
reaches bringup through ``ansible-inventory -i SOURCE --list > inventory.json``.

A script runs with ``--list`` (and ``--host NAME`` for each host when its output has no ``_meta``, as
Ansible does), for at most :data:`TIMEOUT` seconds and :data:`MAX_OUTPUT` bytes of output; it runs in its
own process group, killed whole when it overruns.  A failure, a hang or output that is not that JSON is one
line naming the script.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

from ...child import capture, how_ended
from ...errors import said
from ..vault import Vault
from .model import SourceData, SourceError, Value, text_name, var_name
from .yamlfile import MAX_DEPTH, too_deep

__all__ = ["TIMEOUT", "MAX_OUTPUT", "is_list_output", "parse_list_output", "run_script"]

#: Seconds a script may take to answer; ``BRINGUP_INVENTORY_SCRIPT_TIMEOUT`` sets another bound.
TIMEOUT = 30.0
TIMEOUT_ENV = "BRINGUP_INVENTORY_SCRIPT_TIMEOUT"
#: The whole script (its --list, and its --host for each host when --list has no _meta) within this many
#: times the timeout.
TOTAL_FACTOR = 2
MAX_OUTPUT = 16 * 1024 * 1024


def is_list_output(data: Any) -> bool:
    """Whether a loaded mapping is ``ansible-inventory --list``'s (a ``_meta``, or a group whose hosts are a list)."""
    if not isinstance(data, dict):
        return False
    if "_meta" in data:
        return True
    return any(isinstance(g, list) or (isinstance(g, dict) and isinstance(g.get("hosts"), list))
               for g in data.values())


def parse_list_output(data: Any, path: str, host_vars=None, vault: Vault | None = None) -> SourceData:
    """``--list`` output as an inventory; ``host_vars(name)`` gives a host's variables when ``_meta`` is absent.
    A ``!vault`` value, written ``{"__ansible_vault": ...}``, is decrypted with ``vault``."""
    vault = vault or Vault()

    def val(v: Any, who: str) -> Value:
        return Value(vault.open_tree(v, f"{path}: {who}"), path)

    if not isinstance(data, dict):
        raise SourceError(f"{path}: --list output must be a JSON object of groups, got {type(data).__name__}")
    out = SourceData(path)
    out.group("all")
    meta = data.get("_meta")
    hostvars = None
    if meta is not None:
        if not isinstance(meta, dict) or not isinstance(meta.get("hostvars", {}), dict):
            raise SourceError(f"{path}: _meta must be an object holding hostvars: {{host: {{var: value}}}}")
        hostvars = meta.get("hostvars", {})
    for name, group in data.items():
        if name == "_meta":
            continue
        name = text_name(name, "group", path)
        if isinstance(group, list):
            group = {"hosts": group}
        if group is None:
            group = {}
        if not isinstance(group, dict):
            raise SourceError(f"{path}: group {name!r} must be an object (hosts, children, vars) or a list of "
                              f"hosts, got {type(group).__name__}")
        unknown = set(group) - {"hosts", "children", "vars"}
        if unknown:
            raise SourceError(f"{path}: group {name!r} has unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                              "a group holds only hosts, children and vars")
        g = out.group(name, path)
        for key in ("hosts", "children"):
            if not isinstance(group.get(key, []), list):
                raise SourceError(f"{path}: group {name!r}: {key} must be a list of names")
        gvars = group.get("vars", {}) or {}
        if not isinstance(gvars, dict):
            raise SourceError(f"{path}: group {name!r}: vars must be an object")
        g.vars.update({var_name(k, f"{path}: group {name!r}", out.doubts): val(v, f"group {name!r}: {k}")
                       for k, v in gvars.items()})
        for h in group.get("hosts", []):
            out.add_host(name, text_name(h, "host", f"{path}: group {name!r}"), {}, f"{path}: group {name!r}")
        for c in group.get("children", []):
            out.add_child(name, text_name(c, "group", f"{path}: group {name!r}"), f"{path}: group {name!r}")
    for h in list(out.hosts):
        hv = hostvars.get(h, {}) if hostvars is not None else (host_vars(h) if host_vars else {})
        if not isinstance(hv, dict):
            raise SourceError(f"{path}: the variables of host {h!r} must be an object, got {type(hv).__name__}")
        out.hosts[h].update({var_name(k, f"{path}: host {h!r}", out.doubts): val(v, f"host {h!r}: {k}")
                             for k, v in hv.items()})
    if hostvars:  # hosts only in _meta are hosts too (ungrouped)
        for h, hv in hostvars.items():
            if str(h) not in out.hosts and isinstance(hv, dict):
                h = text_name(h, "host", f"{path}: _meta.hostvars")
                out.add_host("ungrouped", h, {var_name(k, f"{path}: host {h!r}", out.doubts): val(v, f"host {h!r}: {k}")
                                              for k, v in hv.items()}, f"{path}: _meta.hostvars")
    return out


def _run(path: str, *args: str, timeout: float) -> bytes:
    """The script's stdout, bounded by :data:`MAX_OUTPUT` and ``timeout`` (:func:`bringup.child.capture`: a
    process it leaves holding stdout open is not waited for, nor does it cost the answer already printed)."""
    try:
        # The file given, never a command of that name on PATH: "-i inv.py" is ./inv.py, as Ansible runs it.
        done = capture([os.path.abspath(path), *args], timeout=timeout, cap=MAX_OUTPUT,
                       what=f"the inventory script {path}")
    except OSError as e:
        raise SourceError(f"{path}: cannot run the inventory script ({e.strerror}); make it executable "
                          "(chmod +x) with a #! line, or give a YAML/INI inventory") from None
    if done.why == "timeout":
        raise SourceError(f"{path}: the inventory script gave no answer to {' '.join(args)} within {timeout:g} s "
                          "(killed); does it wait for input or the network?")
    if done.why == "too large":
        raise SourceError(f"{path}: the inventory script printed more than {MAX_OUTPUT // 2**20} MiB for "
                          f"{' '.join(args)} (killed)")
    if done.rc != 0:
        last = done.err.decode("utf-8", "replace").strip().splitlines()
        why = f": {said(last[-1], 200)}" if last else ""
        raise SourceError(f"{path}: the inventory script {' '.join(args)} {how_ended(done.rc)}{why}")
    return done.out


def _json(raw: bytes, path: str, args: str) -> Any:
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SourceError(f"{path}: the inventory script's {args} output is not UTF-8") from None
    except json.JSONDecodeError as e:
        # Where, never what: a script that prints something else may print a secret.
        got = "nothing" if not raw.strip() else f"{len(raw)} bytes"
        raise SourceError(f"{path}: the inventory script's {args} output is not JSON (line {e.lineno} column "
                          f"{e.colno}: {e.msg}; it printed {got}); it must print {{group: ..., _meta: {{hostvars: "
                          "...}}") from None
    except RecursionError:
        raise SourceError(f"{path}: the inventory script's {args} output is nested too deeply to read (more than "
                          f"{MAX_DEPTH} levels of objects and lists within each other); flatten it") from None
    except ValueError:  # an integer of more digits than Python converts (4,300): the only other ValueError
        raise SourceError(f"{path}: the inventory script's {args} output holds a number of more than 4,300 digits; "
                          "print it as a string if it is text") from None
    if too_deep(data):
        raise SourceError(f"{path}: the inventory script's {args} output is nested too deeply (more than "
                          f"{MAX_DEPTH} levels of objects and lists within each other); flatten it")
    return data


def script_timeout() -> float:
    """:data:`TIMEOUT`, or the seconds ``$BRINGUP_INVENTORY_SCRIPT_TIMEOUT`` gives (a number above 0)."""
    text = os.environ.get(TIMEOUT_ENV)
    if text is None:
        return TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= 3600:
        raise SourceError(f"{TIMEOUT_ENV}={text!r}: must be a number of seconds above 0 (at most 3600)")
    return value


def run_script(path: str, timeout: float | None = None, vault: Vault | None = None) -> SourceData:
    """Run the executable ``path`` as Ansible runs an inventory script."""
    timeout = script_timeout() if timeout is None else timeout
    # One deadline for the whole script, its --host calls together: 40 hosts whose --host sleeps 2 s each ran
    # past a minute with a bound per call only.
    end = time.monotonic() + TOTAL_FACTOR * timeout
    data = _json(_run(path, "--list", timeout=timeout), path, "--list")
    asked = [0]

    def too_long() -> SourceError:
        return SourceError(f"{path}: the inventory script's --host calls took over {TOTAL_FACTOR * timeout:g} s "
                           f"in all ({asked[0]:,} hosts answered); print _meta.hostvars in its --list output "
                           "(one call for every host), or raise " + TIMEOUT_ENV)

    def host_vars(h: str) -> Any:
        left = end - time.monotonic()
        if left <= 0:
            raise too_long()
        try:
            raw = _run(path, "--host", h, timeout=min(timeout, left))
        except SourceError:
            if time.monotonic() >= end:
                raise too_long() from None
            raise
        asked[0] += 1
        return _json(raw, path, f"--host {h}")

    return parse_list_output(data, path, host_vars=host_vars, vault=vault)
