"""A host's facts: gathered in one round trip, or read back from a saved `invoke facts`."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from ..command import sh
from ..errors import InputError
from ..script import READ_LANES, batch, split
from .base import Fact, UntrustedOutput


def fact_snippet(fact: type[Fact]) -> str:
    """The snippet for one fact; a missing ``requires_command`` prints nothing."""
    if fact.requires_command:
        return sh("command -v %s >/dev/null 2>&1 || exit 0\n", fact.requires_command) + fact.command
    return fact.command


def gather(transport, facts: list[type[Fact]]) -> tuple[dict[str, Any], dict[str, str]]:
    """Run all ``facts`` on the host at once; returns ``(values, errors)``.

    A parser that fails on a host's output yields the fact's default and an
    entry in ``errors``: one odd fact must not stop a run.  An output the parser
    refuses as untrusted (cut short, shifted columns) gives its own one-line
    message; any other failure is named by its exception type.  No facts wanted (roles that declare
    ``FACTS = ()``): no round trip.
    """
    if not facts:
        return {}, {}
    script, token = batch([(f.name, fact_snippet(f)) for f in facts], lanes=READ_LANES)
    res = transport.run_script(script)
    sections = split(res.stdout, token, [f.name for f in facts])
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for fact, sec in zip(facts, sections):
        if sec.rc is None:
            errors[fact.name] = "no output (the fact script stopped early)"
            values[fact.name] = copy.deepcopy(fact.default)
            continue
        if not sec.output.strip():
            values[fact.name] = copy.deepcopy(fact.default)
            continue
        try:
            values[fact.name] = fact.process(sec.output)
        except UntrustedOutput as e:
            errors[fact.name] = " ".join(str(e).split())
            values[fact.name] = copy.deepcopy(fact.default)
        except Exception as e:  # noqa: BLE001 - reported, the run goes on
            errors[fact.name] = " ".join(f"{type(e).__name__}: {e}".split())
            values[fact.name] = copy.deepcopy(fact.default)
    return values, errors


def load_facts(path, host: str) -> tuple[dict, dict]:
    """A saved ``invoke facts`` JSON: ``(facts, fact errors)``; a bad file is one line."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"--facts {p}: {e.strerror or e}") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise InputError(f"--facts {p}: not JSON ({e}); save it with: invoke facts --host {host} > FILE") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("facts"), dict):
        raise InputError(f"--facts {p}: no \"facts\" mapping; save it with: invoke facts --host {host} > FILE")
    errors = doc.get("errors") if isinstance(doc.get("errors"), dict) else {}
    return doc["facts"], {str(k): str(v) for k, v in errors.items()}
