"""What every task shares: the console, the one-line failure, ``--forks``, the host selection and its help,
and the skeleton of a run of the roles, written once.

A task that plans or runs roles (provision, plan, engines, audit, checklist, drift) is::

    with running(inventory, set_, host, hosts, group, roles, forks=forks) as run:
        ...  # run.hosts, run.roles, run.role_vars, run.templates, run.console, run.ahead, run.stop

which connects to the first hosts ahead (:mod:`bringup.engine.ahead`) while the roles load and the variables are
checked (:func:`prepared`), turns a :class:`~bringup.errors.BringupError` into one ``error:`` line and exit 1
(:func:`fail`), makes the templates and the console while the hosts gather their facts, and lets a signal
stop the run in order (:func:`interruptible`).

Heavy modules (pydantic models, rich, Fabric/paramiko, Jinja2, YAML) are imported where they are used, so
``bringup --help`` and ``invoke --list``, which import every task module, pay for none of them.
"""
from __future__ import annotations

import functools
import inspect
import os
import signal
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from invoke import Exit
from invoke import Task as _InvokeTask
from invoke import task as _invoke_task

from ..child import Signalled
from ..errors import BringupError, printable
from ..process import freeze_imports

if TYPE_CHECKING:
    from rich.console import Console

    from ..engine.ahead import Ahead
    from ..inventory.hosts import Host, Inventory
    from ..ssh.sshconfig import Routes
    from ..engine.roles import Role
    from ..engine.results import HostResult
    from ..ssh.stop import Stop
    from ..engine.templates import Templates

__all__ = ["task", "empty_flag", "OPTIONS", "SELECTION", "VAULT", "REPEATED", "options", "console", "fail", "failing", "unreachable", "one_line",
           "MAX_FORKS", "parse_forks",
           "inventory_paths", "load", "selected", "prepared", "Run", "running", "interruptible", "ROLES_STOPPING",
           "interrupted", "print_interrupted"]

#: The help of the options shared by the tasks (the host selection, the inventory, host keys, parallelism),
#: declared once; a task names those it takes (:func:`options`) and adds its own.
OPTIONS = {
    "host": "one host of the inventory",
    "hosts": "several hosts, comma separated",
    "group": "every host of an inventory group",
    "inventory": "Ansible inventory: a YAML or INI file, a folder, a script or ansible-inventory --list output; "
                 "repeatable (merged in order), default ./hosts",
    "set": "KEY=VALUE variable override (highest precedence); repeatable",
    "limit": "Ansible host pattern narrowing the selection ('l40s:&rack2:!trt-l40s-03', 'trt-a10-*'), "
             "or @reports/last.retry",
    "forks": "hosts handled in parallel (default 10)",
    "accept-new-host-keys": "record unknown host keys (a changed key is still refused)",
    "vault-password-file": "file holding the password of the inventory's ansible-vault values and files (an "
                           "executable one is run and prints it); repeatable; default $ANSIBLE_VAULT_PASSWORD_FILE",
    "vault-id": "LABEL@FILE: a vault password for vault id LABEL (ansible-vault --vault-id); repeatable",
}
#: The flags of the inventory's vault passwords, taken by every task that reads the inventory.
VAULT = ("vault-password-file", "vault-id")
#: What a task that selects hosts takes at least.
SELECTION = ("host", "hosts", "group", "inventory", "set") + VAULT
#: The inventory's flags that may repeat: a task's ``@task(iterable=REPEATED)``.
REPEATED = ["set_", "inventory", "vault_password_file", "vault_id"]


def options(*names: str) -> dict[str, str]:
    """The help of the shared options ``names`` (:data:`OPTIONS`), for a task's ``help=``:
    ``options(*SELECTION, "forks") | {"roles": "..."}``."""
    return {name: OPTIONS[name] for name in names}


def _flag(param: str) -> str:
    """The flag of a task's parameter, as Invoke spells it (``set_`` -> ``--set``, ``max_fail`` -> ``--max-fail``)."""
    return "--" + param.strip("_").replace("_", "-")


def empty_flag(arguments: dict[str, Any]) -> str | None:
    """The one line for the first flag in ``arguments`` (a task's, by parameter) given an empty value ('' or
    blanks, once or in a repeated flag), or None.  A flag that takes a value has no meaning left empty:
    ``--serial ''`` is not "no batches", nor ``--testinfra ''`` the current folder's every test."""
    for param, value in arguments.items():
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, str) and not v.strip():
                flag = _flag(param)
                return f"{flag} {v!r}: empty; give {flag} a value, or leave the flag out for its default"
    return None


class _Task(_InvokeTask):
    """Invoke's Task whose automatic short flag is never ``-``: Invoke takes the first free character of the
    dashed name, so ``--testinfra-become`` (t, e, s, n, i, f, r and a taken) got ``--`` as its short flag."""

    def arg_opts(self, name, default, taken_names):
        return super().arg_opts(name, default, set(taken_names) | {"-"})


def task(*args: Any, **kwargs: Any) -> Any:
    """Invoke's ``@task``, the flags checked first: a flag given an empty value is one line, exit 1, before the
    task reads or contacts anything (:func:`empty_flag`).  Every task of bringup is declared with it."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return task()(args[0])

    def declare(body: Callable) -> Any:
        signature = inspect.signature(body)

        @functools.wraps(body)
        def checked(c, *a: Any, **kw: Any) -> Any:
            line = empty_flag(dict(list(signature.bind(c, *a, **kw).arguments.items())[1:]))
            if line:
                raise fail(line)
            try:
                return body(c, *a, **kw)
            except Signalled as e:
                # SIGINT/SIGTERM while a child ran before the run's own handlers (the vault's password program,
                # an inventory script, a Match exec): the child is ended; one line, the signal's exit code.
                raise Exit(_one_line(str(e)), code=e.code) from None
            except Exit as e:
                # Invoke writes an Exit's message to stderr as it is: a host's text in it (an error a host
                # answered, a GPU name) must not act on the terminal either (issue 40 item 6).
                from ..errors import printable

                if isinstance(e.message, str) and printable(e.message) != e.message:
                    raise Exit(printable(e.message), code=e.code) from None
                raise

        return _invoke_task(*args, **{"klass": _Task, **kwargs})(checked)

    return declare


def console() -> Console:
    """The console a task prints to."""
    # Piped into a log or CI, rich would assume 80 columns and cut the tables' headers: give them room.
    # emoji=False: text from a host or the inventory is never an emoji code (a PCI bus 0000:ab:00.0 printed
    # as 0000🆎00.0).
    return _safe_console_class()(highlight=False, soft_wrap=True, emoji=False,
                                 width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160)


@functools.lru_cache(maxsize=None)
def _safe_console_class() -> type:
    """rich's Console, made safe at its root for text from hosts, scripts and textfiles (issue 40 item 6):
    every character rendered that is a control character (ESC of an ANSI or OSC sequence, BEL; newline and
    tab kept) is written out as ``\\xNN`` (:func:`~bringup.checks.printable`), whatever path the text took (a
    string, a Text, a table cell); no hyperlink is emitted (bringup prints none: a ``[link=...]`` a host
    smuggled into markup does nothing); and a string whose markup does not parse (a host name holding
    ``[/x]``) is printed as it is, never a MarkupError traceback.  Rich's own control segments (cursor moves
    of a progress display) pass untouched.  Host text put into markup is still escaped where it is
    (rich.markup.escape), so that a ``[bold red]`` in it stays text."""
    from rich.console import Console as _Console
    from rich.errors import MarkupError
    from rich.segment import Segment

    from ..errors import printable

    class SafeConsole(_Console):
        def render(self, renderable, options=None):  # type: ignore[override]
            for seg in super().render(renderable, options):
                if seg.control is None:
                    text, style = seg.text, seg.style
                    shown = printable(text)
                    if style is not None and style.link:
                        style = style.update_link(None)
                    if shown is not text or style is not seg.style:
                        seg = Segment(shown, style)
                yield seg

        def render_str(self, text, **kwargs):  # type: ignore[override]
            try:
                return super().render_str(text, **kwargs)
            except MarkupError:
                return super().render_str(text, **{**kwargs, "markup": False})

    return SafeConsole


def fail(e: Exception | str) -> Exit:
    """Bad input as the task's end: one ``error:`` line, exit 1."""
    return Exit(_one_line(f"error: {e}"), code=1)


def one_line(text: str) -> str:
    """A task's last word as one line: a secret of the inventory, of any length, standing alone in a line (a value
    the role quoted) is ********; then a newline or carriage return a value carried (a flag's, a file name's) is
    written out, as any control character is, so that no value adds a line of its own to the output."""
    from ..errors import printable
    from ..secrets import MASK

    return printable(MASK.mask_lines(text)).replace("\r", "\\r").replace("\n", "\\n")


_one_line = one_line


@contextmanager
def failing() -> Iterator[None]:
    """A :class:`~bringup.errors.BringupError` raised inside ends the task as :func:`fail` says."""
    try:
        yield
    except BringupError as e:
        raise fail(e) from None


def unreachable(e: Exception) -> Exit:
    """A host (or its Triton) out of reach as the task's end: one ``unreachable:`` line, exit 4."""
    return Exit(_one_line(f"unreachable: {e}"), code=4)


MAX_FORKS = 256


def parse_forks(text) -> int:
    """``--forks``: a whole number 1..MAX_FORKS (the tasks take it as text, so Invoke's parser never
    tracebacks on ``--forks many``)."""
    try:
        n = int(str(text).strip()) if not isinstance(text, bool) else 0
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_FORKS:
        raise BringupError(f"--forks {text!r}: must be a whole number from 1 to {MAX_FORKS} "
                           "(hosts handled at once), e.g. --forks 10")
    return n


def inventory_paths(inventory) -> list[str]:
    """``--inventory`` as given: once (text), several times (a list: Invoke's iterable flag), or not (``./hosts``)."""
    if isinstance(inventory, (list, tuple)):
        return [str(p) for p in inventory] or ["hosts"]
    return [str(inventory)] if inventory else ["hosts"]


def load(inventory, set_, vault: tuple = ()) -> Inventory:
    """The inventories (``--inventory``, once or more) with the ``--set`` overrides, opened with the vault
    passwords ``vault`` names (``(--vault-password-file, --vault-id)``, and ``$ANSIBLE_VAULT_PASSWORD_FILE``);
    from here on, what is printed has its secrets masked.  What the inventory took with a doubt (a variable name
    that is not Ansible's form) is one ``warning:`` line each on stderr."""
    from ..inventory.hosts import load_inventory, parse_set
    from ..secrets import mask_output
    from ..inventory.vault import vault_from_options

    # From here on, whatever is printed (rich, invoke's error line) has the inventory's secrets masked.
    mask_output()
    inv = load_inventory(inventory_paths(inventory), overrides=parse_set(list(set_ or [])),
                         vault=vault_from_options(*vault))
    for line in inv.warnings:  # what was taken with a doubt (a variable name `my-var`): one line each, on stderr
        print(f"warning: {printable(line)}", file=sys.stderr, flush=True)
    return inv


def selected(inventory, set_, host, hosts, group, limit=None, vault: tuple = (), routes: Routes | None = None,
             connects: bool = True) -> tuple[Inventory, list[Host]]:
    """The inventory and the hosts that ``--host/--hosts/--group`` and ``--limit`` pick; their routes are worked out
    into ``routes`` (the run's, which its connections read: each host's ssh config looked up once).  ``connects``
    False: the command reaches no host (``--facts FILE``), and no route is worked out: its ssh config, ``Match exec``
    commands, key and known_hosts files are the login's business (``UserKnownHostsFile=/dev/null``, refused at a
    login, plans offline)."""
    from ..ssh.sshconfig import check_routes

    inv = load(inventory, set_, vault)
    if limit and not (host or hosts or group):
        chosen = inv.limit(limit)  # --limit alone picks from the whole inventory
    else:
        chosen = inv.select(host=host, hosts=hosts, group=group)
        chosen = inv.limit(limit, chosen) if limit else chosen
    if connects:
        for h in chosen:  # a become bringup does not do (su, doas): one line, before any connection
            h.refuse_become()
        check_routes(chosen, routes)  # an ssh option or ssh config bringup cannot honour: one line, before any connection
    return inv, chosen


def prepared(inventory, set_, host, hosts, group, roles, limit=None, ahead: Ahead | None = None, dial: int = 0,
             check=None, vault: tuple = (), lock: bool = False, routes: Routes | None = None, connects: bool = True):
    """The selected hosts and roles, with every role's variables merged and validated.

    Returns ``(inventory, hosts, content root, roles, variables by host)``: what every task that plans or
    runs roles starts from (provision, audit, checklist, drift, bench, tune-window), and what a tool
    outside the CLI uses to see the same declared state (bench/peers/audit_spec.py).

    Nothing connects, unless ``ahead`` is given: then the first ``dial`` hosts are connected to as soon as the
    inventory named them, while the roles load and the variables are checked, and their facts are gathered
    once every check passed (the variables, then ``check(hosts)``, the caller's own: the rollout's hooks)
    while the caller goes on (:mod:`bringup.engine.ahead`); ``lock``: a run that writes, whose connections take the host's
    run lock first, gathering the facts in the same round trip.  The caller closes ``ahead`` when the run ends, and
    when this raises: a refused run has run no command on any host.  The hosts' routes are worked out into
    ``routes`` (``ahead``'s when None), for the run's connections to read; ``connects`` False (a run from saved
    facts, which reaches no host): they are not (:func:`selected`).
    """
    if routes is None and ahead is not None:
        routes = ahead.routes
    inv, chosen = selected(inventory, set_, host, hosts, group, limit, vault, routes, connects)
    if ahead is not None:
        ahead.dial(chosen[:dial])
    # Imported while the hosts log in: the roles and the runner are no part of connecting.
    from ..project import content_root
    from ..engine.roles import fact_keys, load_roles, select_roles, wanted_facts
    from ..engine.runner import prepare

    root = content_root()
    # The roles --roles does not name are not imported (their defaults come from the roles' manifest).
    order, all_roles = load_roles(root, only=roles)
    chosen_roles = select_roles(order, all_roles, roles)
    role_vars = prepare(chosen, chosen_roles, [all_roles[r] for r in order])
    if check is not None:
        check(chosen)
    if ahead is not None:
        from ..ssh.runlock import who

        ahead.want(wanted_facts(chosen_roles, ahead.extra_facts),
                   {h.name: fact_keys(chosen_roles, role_vars[h.name], ahead.extra_facts) for h in chosen[:dial]},
                   lock=who() if lock else None, roles=[r.name for r in chosen_roles])
    return inv, chosen, root, chosen_roles, role_vars


@dataclass
class Run:
    """A run of the roles as :func:`running` set it up."""

    inventory: Inventory
    hosts: list[Host]
    root: Path
    roles: list[Role]
    role_vars: dict[str, dict[str, Any]]
    #: ``--forks``: hosts handled at once, and connected to ahead.
    forks: int
    templates: Templates
    console: Console
    ahead: Ahead
    stop: Stop


@contextmanager
def running(inventory, set_, host=None, hosts=None, group=None, roles=None, *, limit=None, forks: int | str = 1,
            accept_new_host_keys: bool = False, connect_ahead: bool = True,
            hold: Callable[[Host], bool] | None = None, extra_facts: tuple[str, ...] = (),
            check: Callable[[list[Host]], None] | None = None, vault: tuple = (), lock: bool = False,
            connects: bool = True, reads: bool = False) -> Iterator[Run]:
    """The skeleton of every task that plans or runs roles (see the module): yields the :class:`Run`.

    The first ``forks`` hosts are connected to while the roles load and the variables are checked, unless
    ``connect_ahead`` is False (a rolling run) or ``hold(host)`` holds one back (its drain hook comes first);
    ``extra_facts`` are gathered with the roles' (the checklist's own); ``check(hosts)`` is the caller's own
    check of the input, after the variables'; ``lock``: the run writes (not check mode), its connections opened
    ahead take the host's run lock with the facts; ``connects`` False: the body reaches no host (``--facts FILE``),
    so no route is worked out and nothing is connected to ahead; ``reads``: the body only reads (checklist, audit,
    drift), so a signal ends its round trips at once (:data:`READS_STOPPING`).  A BringupError, here or in the
    body, ends the task with one ``error:`` line; a signal in the body stops the run in order (``run.stop``).
    Leaving it closes the connections no host took.
    """
    from ..engine.ahead import Ahead

    with Ahead(enabled=connect_ahead and connects, hold=hold or (lambda h: False), extra_facts=extra_facts,
               accept_new_host_keys=accept_new_host_keys) as ahead, failing():
        n = parse_forks(forks)
        inv, chosen, root, chosen_roles, role_vars = prepared(inventory, set_, host, hosts, group, roles, limit,
                                                              ahead=ahead, dial=n, check=check, vault=vault,
                                                              lock=lock, connects=connects)
        # Imported and made while the hosts connect and gather their facts.
        from ..engine.templates import Templates

        out = console()
        templates = Templates(root / "templates")
        # The run's modules are loaded: no garbage collection walks them again (bringup.process).
        freeze_imports()
        with interruptible(out, READS_STOPPING if reads else ROLES_STOPPING, at_once=reads) as stop:
            yield Run(inv, chosen, root, chosen_roles, role_vars, n, templates, out, ahead, stop)


#: What the first signal of a run of the roles stops, and what a second one does.
ROLES_STOPPING = ("no new host or role starts, the roles in progress finish; a host that answers nothing within "
                  "{grace:g} s is let go ({name} again abandons them all)")


#: What the first signal of a run that only reads (facts, checklist, audit, drift) stops: everything, at once.
READS_STOPPING = ("the reads in flight are ended at once (this task changes nothing on the hosts)")


#: The signals that stop a run in order: Ctrl-C, SIGTERM, and SIGHUP (the operator's terminal or SSH session gone).
STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def interruptible(console: Console, stopping: str = ROLES_STOPPING, at_once: bool = False) -> Iterator[Stop]:
    """SIGINT/SIGTERM/SIGHUP stop the run in order (:class:`Stop`) instead of killing it; yields the Stop.

    The first signal starts no new host or role, the second abandons the steps
    in flight; either way the recap is printed, the report written, and the
    exit code is the signal's (130, 143, 129).  ``stopping`` is what the first signal's line says is stopped (a
    task that runs no roles says its own: ``{name}`` and ``{grace}`` are filled in).  ``at_once``: the run only
    reads (:data:`READS_STOPPING`): the first signal abandons the round trips in flight (:attr:`Stop.at_once`).

    SIGHUP (Python's default: killed on the spot, a role half done, a tune's trial configuration left serving
    until the next run) is a stop in order too, unless the operator's shell ignores it: ``nohup bringup provision``
    runs on past a dropped session.  What the run still prints once its terminal hung up goes to /dev/null
    (:class:`bringup.secrets.MaskedStream`), never an EIO traceback.
    """
    from ..ssh.stop import Stop, tell

    stop = Stop(at_once=at_once)
    if threading.current_thread() is not threading.main_thread():
        yield stop  # signal handlers live in the main thread only
        return

    def handle(signum, _frame) -> None:
        # Plain text, no rich rendering: a handler runs between any two bytecodes of the main thread,
        # even in the middle of an import that rich's rendering would need.
        name = signal.Signals(signum).name
        if stop.request(signum):
            tell(f"{name}: stopping: " + stopping.format(name=name, grace=stop.grace))
        else:
            tell(f"{name} again: abandoning the steps in flight")

    # SIGHUP the operator's shell ignores (nohup) stays ignored.
    before = {s: signal.signal(s, handle) for s in STOPPING_SIGNALS
              if s != signal.SIGHUP or signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield stop
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def interrupted(stop: Stop, e: Exception) -> Exit:
    """A task that runs no roles (bench, tune) stopped by a signal: its one line, the signal's exit code."""
    return Exit(str(e), code=stop.exit_code)


def print_interrupted(stop: Stop, results: list[HostResult], console: Console) -> None:
    """After the recap: which hosts the signal cut short, and which never started."""
    cut = [r for r in results if r.status == "interrupted"]
    never = [r.host for r in results if r.status == "not started"]
    console.print(f"[bold yellow]INTERRUPTED[/] by {stop.name}", highlight=False)
    for r in cut:
        console.print(f"  {r.host}: {r.message}", markup=False, highlight=False)
    if never:
        console.print(f"  not started: {', '.join(never)}", markup=False, highlight=False)
