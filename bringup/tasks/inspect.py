"""``invoke facts``, ``hosts`` and ``topology``: what the inventory and a host say, changing nothing."""
from __future__ import annotations

import json
import math
import sys

from ..errors import BringupError, Unreachable, printable
from ..process import command
from .context import READS_STOPPING, REPEATED, VAULT, console, fail, failing, interrupted, interruptible, load, options
from .context import selected, unreachable
from .context import task  # Invoke's @task, an empty flag value refused first

__all__ = ["facts", "hosts", "topology"]


def _host_facts(task_name, inventory, set_, host, accept_new_host_keys, validate=None, facts_file=None,
                raw=False, vault: tuple = ()):
    """One ``--host``'s facts, gathered in one round trip (or read from a saved ``invoke facts``, without
    connecting); errors become one line and an exit code."""
    from ..ssh.connection import connect
    from ..ssh.sshconfig import Routes
    from ..ssh.stop import Interrupted
    from ..facts import ALL_FACTS
    from ..facts.gather import collect_raw, gather, load_facts

    try:
        routes = Routes()  # the host's route worked out once: checked, then connected with (none from saved facts)
        _, chosen = selected(inventory, set_, host, None, None, vault=vault, routes=routes, connects=not facts_file)
        if len(chosen) != 1:
            raise BringupError(f"{task_name} takes one --host")
        if validate:
            validate(chosen[0].vars)
        if facts_file:
            return (chosen[0], *load_facts(facts_file, chosen[0].name))
    except Unreachable as e:
        raise unreachable(e) from None
    except BringupError as e:
        raise fail(e) from None
    # A read: SIGINT, SIGTERM or SIGHUP (the operator's terminal gone) ends the round trip at once, its commands on
    # the host with it, in one line and the signal's exit code (SIGTERM and SIGHUP killed bringup on the spot, a
    # hung nvidia-smi of a local host left running; Ctrl-C was a bare exit 1).
    with interruptible(console(), READS_STOPPING, at_once=True) as stop:
        try:
            t = connect(chosen[0], accept_new_host_keys=accept_new_host_keys, routes=routes)
        except Unreachable as e:
            raise (interrupted(stop, _stopped(stop, chosen[0].name)) if stop.requested else unreachable(e)) from None
        except BringupError as e:
            raise fail(e) from None
        stop.track(t)
        try:
            stop.check("before its facts were read")
            if raw:
                return chosen[0], collect_raw(t, ALL_FACTS), {}
            values, errors = gather(t, ALL_FACTS)
            stop.check("while its facts were read")
        except Interrupted:
            raise interrupted(stop, _stopped(stop, chosen[0].name)) from None
        except Unreachable as e:  # command_timeout: the host stopped answering mid-gather
            if stop.requested:
                raise interrupted(stop, _stopped(stop, chosen[0].name)) from None
            raise unreachable(f"{chosen[0].name}: {e}") from None
        except BringupError as e:
            raise fail(f"{chosen[0].name}: {e}") from None
        finally:
            stop.untrack(t)
            t.close()
    return chosen[0], values, errors


def _stopped(stop, host: str) -> str:
    return f"{stop.name}: stopped; the read of {host}'s facts was ended, nothing shown"


@task(iterable=REPEATED, help=options("host", "inventory", "set", *VAULT, "accept-new-host-keys") | {
    "raw": "every fact command's raw output instead of the parsed values (topology/checklist --facts take either)"})
def facts(c, host=None, inventory=None, set_=None, accept_new_host_keys=False,
          raw=False, vault_password_file=None, vault_id=None):
    """Print a host's facts as JSON (gathered in one round trip)."""
    target, values, errors = _host_facts("facts", inventory, set_, host, accept_new_host_keys, raw=raw,
                                         vault=(vault_password_file, vault_id))
    if raw:
        sys.stdout.write(json.dumps({"host": target.name, "raw": values}, indent=2, sort_keys=True) + "\n")
        return
    doc = {"host": target.name, "facts": values}
    if errors:
        doc["errors"] = errors
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")


@task(iterable=REPEATED, help=options("inventory", "set", *VAULT) | {
    "host": "show this host's variables, each with its value and where it was set (file:line and group), "
            "as `ansible-inventory --host` plus the source",
    "json": "with --host: print {variable: {value, source}} as JSON"})
def hosts(c, inventory=None, set_=None, host=None, json_=False, vault_password_file=None, vault_id=None):
    """List the inventory: hosts, groups, address and GPU profile (--host X: X's variables and their sources)."""
    from rich.markup import escape
    from rich.table import Table

    with failing():
        inv = load(inventory, set_, (vault_password_file, vault_id))
        target = inv.host(host) if host else None
    if target is not None:
        rows = [(name, _json_keys(value), source) for name, value, source in variable_sources(target)]
        if json_:
            doc = {name: {"value": value, "source": source} for name, value, source in rows}
            sys.stdout.write(json.dumps(doc, indent=2, default=str, allow_nan=False) + "\n")
            _say_refused([target])
            return
        t = Table("variable", "value", "source", box=None,
                  title=escape(printable(f"{target.name} ({', '.join(target.groups)})")))
        for name, value, source in rows:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            t.add_row(escape(printable(name)), escape(printable(text)), escape(printable(source)))
        console().print(t)
        _say_refused([target])
        return
    head = ("host", "groups", "address", "connection", "gpu_profile")
    rows = []
    for h in inv.hosts.values():
        conn = h.connection
        addr = (f"{_shown(h.vars.get('ansible_user'), conn.ansible_user or 'root')}@"
                f"{_shown(h.vars.get('ansible_host'), h.address)}:{_shown(h.vars.get('ansible_port'), conn.ansible_port)}"
                if conn.ansible_connection != "local" else "(local)")
        rows.append((h.name, ",".join(h.vars["group_names"]), addr,
                     _shown(h.vars.get("ansible_connection"), conn.ansible_connection),
                     _shown(h.vars.get("gpu_profile"), h.vars.get("gpu_profile", "-"))))
    if len(rows) <= PLAIN_ROWS:
        t = Table(*head, box=None)
        for row in rows:  # names and values are data: Rich markup in them is shown, not read
            t.add_row(*(escape(c) for c in row))
        console().print(t)
        _say_refused(inv.hosts.values())
        return
    # A large inventory as plain aligned text, one pass: Rich's table measures every cell again and again
    # (40,000 hosts took 13 s of its time); the same columns, no wrapping.
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]
    text = "\n".join(" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *rows])
    console().print(text, markup=False, highlight=False, soft_wrap=True)
    _say_refused(inv.hosts.values())


#: The most hosts whose refusal ``hosts`` spells out (the rest are counted).
REFUSED_SAID = 20


def _say_refused(hosts) -> None:
    """A ``warning:`` line on stderr for each listed host that a run would refuse before connecting (a become
    bringup does not do: su, doas): listed as any other host, it was refused only when a run selected it.  At most
    :data:`REFUSED_SAID` spelled out, the others counted."""
    refused = [h for h in hosts if h.become_refused]
    for h in refused[:REFUSED_SAID]:
        print(f"warning: a run refuses host {printable(h.name)!r} before connecting: {printable(h.become_refused)}",
              file=sys.stderr, flush=True)
    if len(refused) > REFUSED_SAID:
        print(f"warning: and {len(refused) - REFUSED_SAID:,} more hosts a run refuses likewise "
              f"(hosts --host NAME says why)", file=sys.stderr, flush=True)


def _shown(raw, value) -> str:
    """``value`` as a listing shows it: ``********`` when the inventory's ``raw`` value is a vault's (of any
    length: a two-letter user is no less secret)."""
    from ..secrets import HIDDEN, MASK

    return HIDDEN if MASK.is_secret(raw) else str(value)


def _json_keys(value):
    """``value`` with every mapping key JSON cannot write (a YAML date, ``!!binary``) as its text; values JSON
    cannot write are ``default=str``'s.  A float that is no number (YAML's ``.nan``, ``.inf``, ``-.inf``), a value
    or a key, is that YAML spelling as text: json.dumps wrote ``NaN`` and ``-Infinity``, which no JSON reader takes.
    Inventory values nest at most MAX_DEPTH (200) levels."""
    if isinstance(value, dict):
        return {_not_finite(k) if isinstance(k, float) else k if isinstance(k, (str, int, bool, type(None)))
                else str(k): _json_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_keys(v) for v in value]
    return _not_finite(value) if isinstance(value, float) else value


def _not_finite(x: float) -> float | str:
    """``x``, or YAML's spelling of it as text when it is no finite number."""
    if math.isnan(x):
        return ".nan"
    if math.isinf(x):
        return ".inf" if x > 0 else "-.inf"
    return x


#: Above this many hosts, ``invoke hosts`` prints plain aligned rows instead of a Rich table.
PLAIN_ROWS = 500


def variable_sources(host) -> list[tuple[str, object, str]]:
    """``host``'s inventory variables as Ansible gives them (unrendered), sorted, each with where it was set;
    a secret's value is never shown."""
    from ..inventory.hosts import SECRET_VARS
    from ..secrets import MASK
    from ..inventory.vault import holds_vaulted

    # A vault's text is masked however short it is (the run's masker skips texts under 4 characters).
    return [(name, "********" if name in SECRET_VARS or holds_vaulted(value) else MASK.mask_obj(value),
             host.sources.get(name, "?")) for name, value in sorted(host.raw.items())]


@task(iterable=REPEATED, help=options("host", "inventory", "set", *VAULT, "accept-new-host-keys") | {
    "json": "print the plan as JSON", "facts": f"a saved `{command('facts')}` (or `--raw`) JSON: plan without connecting"})
def topology(c, host=None, inventory=None, set_=None, json_=False,
             accept_new_host_keys=False, facts=None, vault_password_file=None, vault_id=None):
    """Explain the CPU/IRQ plan of a host: IRQ, Triton and other CPUs per NUMA node, and warnings."""
    from ..hardware.topology import plan_topology, validate_vars
    from ..hardware.topology_text import format_plan

    target, values, errors = _host_facts("topology", inventory, set_, host, accept_new_host_keys,
                                         validate=validate_vars, facts_file=facts,
                                         vault=(vault_password_file, vault_id))
    # A fact that could not be read or trusted (a truncated lscpu -p) is what the plan lacks: say which, and why.
    why = "; ".join(f"fact {k}: {v}" for k, v in sorted(errors.items()) if k in ("cpu.topology", "pci.devices",
                                                                                  "net.interfaces", "nvidia.topo"))
    try:
        result = plan_topology(values, target.vars)
    except BringupError as e:
        raise fail(f"host {target.name}: {e}" + (f" ({why})" if why else "")) from None
    except (TypeError, KeyError, AttributeError, ValueError, IndexError) as e:
        if not facts:
            raise
        # Gathered facts come from the parsers; a saved file is only as good as its author.
        raise fail(f"--facts {facts}: a fact is not shaped as `{command('facts')}` writes it ({type(e).__name__}: {e}); "
                   f"save it with: {command(f'facts --host {target.name} > FILE')}") from None
    if json_:
        doc = {"host": target.name, "plan": result.to_dict()}
        if errors:
            doc["fact_errors"] = errors
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    format_plan(result, console(), title=target.name)
    for k, v in sorted(errors.items()):
        console().print(f"fact {k} not used: {v}", style="yellow", markup=False, highlight=False)
