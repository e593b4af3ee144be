"""``invoke audit --export-testinfra DIR``: the built-in audit, readable as testinfra.

Per selected host and role, ``DIR/<host>/test_<role>.py``: a testinfra module listing every item the role
declares for that host, grouped by kind (``test_file``, ``test_sysctl``, ``test_service``, ``test_expect`` for
the runtime promises of the role's ``audit`` hook, ...), each with the values the role wants
(:func:`bringup.testinfra.declared.values`).  A test audits its item as ``invoke audit`` does
(:func:`bringup.testinfra.declared.check`), so the modules hold no second copy of the audit's logic.  They run
with plain pytest::

    pytest --bringup-inventory=hosts DIR                     # each module against its own host
    pytest --hosts=bringup://trt-l40s-01 DIR/trt_l40s_01

The host's folder is a package named after the host (``trt-l40s-01`` -> ``trt_l40s_01``), so that two hosts'
``test_sysctl.py`` can be collected in one run.  A file there that bringup did not write is never replaced.
"""
from __future__ import annotations

import datetime
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..errors import BringupError, InputError, Unreachable, printable
from ..outfile import out_folder, sub_folder, write_atomic
from ..process import command
from ..userfile import home, read_regular

if TYPE_CHECKING:
    from ..inventory.hosts import Host
    from ..engine.roles import Role
    from ..engine.runner import Options
    from ..engine.templates import Templates

__all__ = ["MARK", "folder", "target", "refuse_foreign", "module_text", "export"]

#: The first line of every module bringup writes (a file without it is the operator's, never replaced).
MARK = "# Written by bringup audit --export-testinfra"


def folder(name: str) -> str:
    """A host's folder: its name as a Python identifier (the folder is a package)."""
    slug = re.sub(r"\W", "_", name, flags=re.ASCII)
    return slug if slug[:1].isalpha() else f"h_{slug}"


def target(path: str) -> Path:
    """``--export-testinfra DIR``: an output folder as every ``--out`` is (:func:`bringup.outfile.out_folder`: a
    folder, or one that can be made, where something can be written, and no symbolic link on its way out of the
    folder it sits in); anything else is one line, before anything connects.  Its own look let a link out of the
    working folder be written through, and a folder where nothing can be made (``/proc/x``, a read-only one) was
    a traceback once the hosts were audited."""
    return out_folder(home(path), "--export-testinfra", fix="give a folder for the modules (never written through a "
                                                            "link)")


def refuse_foreign(out: Path, hosts: list[Host]) -> None:
    """Before connecting: a host folder holding a test module bringup did not write is refused (one line)."""
    seen: dict[str, str] = {}
    for h in hosts:
        f = folder(h.name)
        if f in seen:
            raise InputError(f"--export-testinfra: hosts {seen[f]} and {h.name} would share the folder {f}; "
                             "export them one at a time, into two folders")
        seen[f] = h.name
        for p in sorted((out / f).glob("*.py")) if (out / f).is_dir() else []:
            why = "" if p.name == "__init__.py" else _not_ours(p, out / f)
            if why:
                raise InputError(f"--export-testinfra: {printable(str(p))} {why}; it is never replaced: "
                                 "move it or export into another folder")


#: How much of a module's start is read to find :data:`MARK` (its first line).
MARK_READ = 4096


def _not_ours(p: Path, where: Path) -> str:
    """Why ``p`` is no module bringup wrote ('' when it is one): only a regular file inside ``where`` is looked at
    (opened without waiting, its first :data:`MARK_READ` bytes read): a pipe, a device, a folder or a link out of
    the folder is named, never opened by a blocking read nor read without end, and left as it is."""
    from ..untrusted import Unreadable
    from ..userfile import link_out

    if link_out(p, where) is not None:
        return "is a symbolic link out of its folder, not a module bringup wrote"
    try:
        head = _head(p, Unreadable, where)
    except Unreadable as e:
        return f"is {e}, not a module bringup wrote"
    return "" if head.startswith(MARK.encode()) else "was not written by bringup"


def _head(p: Path, error, where: Path) -> bytes:
    """The first :data:`MARK_READ` bytes of the regular file ``p``, else ``error(why)``: opened without waiting (as
    :func:`bringup.userfile.read_capped` opens, which refuses a file over its cap: a long module is fine here, only
    its start counts), then held to a regular file within ``where`` (the file opened, not the name looked at before:
    one swapped for a link out between the look and the open is not read)."""
    import os
    import stat

    from ..userfile import opened_within

    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error("gone") from None
    except OSError as e:
        raise error(f"unreadable ({e.strerror or e})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise error("not a regular file (a pipe, a device or a folder)")
        if not opened_within(fd, p, where):
            raise error("a symbolic link out of its folder")
        return read_regular(fd, MARK_READ)[:MARK_READ]
    except OSError as e:
        raise error(f"unreadable ({e.strerror or e})") from None
    finally:
        os.close(fd)


def module_text(host: str, role: str, items: list[dict[str, Any]], inventory: str, where: str) -> str:
    """The testinfra module of ``role`` as declared for ``host``."""
    from .. import __version__
    from .backend import host_spec

    kinds: dict[str, list[dict[str, Any]]] = {}
    for i in items:
        kinds.setdefault(re.sub(r"\W", "_", i["kind"], flags=re.ASCII), []).append(i)
    when = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    head = f'''{MARK} (bringup {__version__}, {when}).
"""Role {role}, as it is declared for host {host}: the built-in audit's items as testinfra tests.

Each test is one item the role declares for this host, with the values it wants; bringup audits it as
`{command('audit')}` does (through the bringup:// backend: one connection, the role's facts, then every read of the
role in one round trip), so it passes, skips or fails where the audit's item does, with the audit's line.
A value the role declares differently now (the inventory or the role changed) fails the test naming it:
export again.  Inventory at export: {inventory}.

    pytest --bringup-inventory={inventory} {where}
    pytest --hosts={host_spec(host)} --bringup-inventory={inventory} {where}
"""
import pytest

from bringup.testinfra.declared import check

HOST = {host!r}
ROLE = {role!r}
testinfra_hosts = [{host_spec(host)!r}]
'''
    body = []
    for kind, group in kinds.items():
        const = kind.upper()
        rows = "".join(f"    {i!r},\n" for i in group)
        body.append(f"\n{const} = [\n{rows}]\n\n\n"
                    f"@pytest.mark.parametrize(\"item\", {const}, ids=[i[\"name\"] for i in {const}])\n"
                    f"def test_{kind}(host, item):\n    check(host, ROLE, item, HOST)\n")
    if not body:
        body.append("\n\ndef test_nothing_declared(host):\n    \"\"\"The role declares nothing for this host.\"\"\"\n")
    from ..secrets import MASK

    return MASK.mask(head + "\n".join(body))


def export(hosts: list[Host], roles: list[Role], role_vars: dict[str, dict], templates: Templates, out: Path,
           opts: Options, inventory: str, say: Callable[[str], None] = print, stop=None) -> int:
    """Write the modules of ``roles`` for each of ``hosts`` (``opts.forks`` at a time); each host's lines as it
    is done.  Returns 0, 2 when a role could not be declared for a host, 4 when a host was unreachable."""
    from ..checklist.audit import AuditedRole
    from ..engine.runner import HostRun
    from ..ssh.stop import as_completed_awake
    from .declared import item_of

    audited = [AuditedRole(r.name, r.module) for r in roles]

    def one(h: Host) -> tuple[int, list[str]]:
        if stop is not None and stop.requested:
            return 0, [f"{h.name}: not started: interrupted by {stop.name}"]
        run = HostRun(h, audited, role_vars[h.name], opts, templates, stop=stop)
        code, lines = 0, []
        try:
            run.gather()
            for role in audited:
                try:
                    resources = run.declare(role)[2]
                except BringupError as e:
                    code = 2
                    lines.append(f"{h.name}: {e}; its module is not written")
                    continue
                where = sub_folder(out, folder(h.name))
                if not (where / "__init__.py").exists():
                    write_atomic(where / "__init__.py", "")
                path = where / f"test_{role.name}.py"
                write_atomic(path, module_text(h.name, role.name, [item_of(r) for r in resources],
                                             str(Path(inventory).resolve()), str(where)))
                lines.append(f"{h.name}: wrote {path} ({len(resources)} items)")
        except Unreachable as e:
            return 4, [f"{h.name}: unreachable: {e}"]
        except BringupError as e:
            return 2, [f"{h.name}: {e}"]
        finally:
            run.close()
        return code, lines

    codes = []
    with ThreadPoolExecutor(max_workers=max(1, min(opts.forks, len(hosts)))) as pool:
        for f in as_completed_awake([pool.submit(one, h) for h in hosts]):  # a signal handled on time
            code, lines = f.result()
            codes.append(code)
            for line in lines:
                say(line)
    return 4 if 4 in codes else 2 if 2 in codes else 0
