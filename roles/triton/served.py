"""What Triton serves, against what the role renders: the audit's view of a configuration loaded on the
running server that no file and no record says (an ``invoke tune`` cut short before it loaded the model's
own configuration back, a hand-made override).

Triton's model control API swaps a model's configuration in place without touching its ``config.pbtxt``,
so the files and the record (``/etc/bringup/triton-window.json``) can all be as the role wants while Triton
serves something else.  The audit reads each model's configuration from Triton's config API and compares
the four knobs ``invoke tune`` moves (instances per GPU, ``max_batch_size``, the preferred sizes, the
window) with the ``config.pbtxt`` the role renders from the inventory and the record.
"""
from __future__ import annotations

import json

from bringup.engine.auditkit import Expect
from bringup.ssh.command import sh
from bringup.errors import said
from bringup.facts.triton import WINDOW_RECORD
from bringup.latency.serving import Serving, serving_of

__all__ = ["rendered_serving", "served_differs", "serving_matches"]

#: What starts each model's answer in the read snippet's output (a JSON text never starts a line with it).
MARK = "@@ model "


def rendered_serving(text: str) -> Serving:
    """The serving configuration of a rendered ``config.pbtxt`` (parsed with Triton's own schema, read as
    Triton's config API writes it)."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    cfg = model_config_pb2.ModelConfig()
    text_format.Parse(text, cfg)
    return serving_of(json_format.MessageToDict(cfg, preserving_proto_field_name=True))


def _words(s: Serving, keys: list[str]) -> str:
    out = []
    for k in keys:
        v = getattr(s, k)
        if k == "instance_count":
            out.append(f"{v} instance{'s' if v != 1 else ''}")
        elif k == "max_batch_size":
            out.append(f"max batch {v}")
        elif k == "preferred_batch_size":
            out.append(f"preferred [{', '.join(map(str, v))}]")
        else:
            out.append("no dynamic batching" if v is None else f"window {v} µs")
    return ", ".join(out)


def served_differs(model: str, served: Serving, wanted: Serving, repo: str, base: str) -> str | None:
    """One line when Triton serves ``model`` otherwise than the role renders it: what it serves, what the
    inventory and the record want, and how to load the model's own configuration back (Triton at ``base``,
    its repository ``repo``); None when alike.

    A load without an override reloads a model only when its files changed (Triton 2.51 keeps an override
    otherwise, and so does a provision, whose reload follows a changed file): the fix touches the file."""
    keys = [k for k in ("instance_count", "max_batch_size", "preferred_batch_size", "window_us")
            if getattr(served, k) != getattr(wanted, k)]
    if not keys:
        return None
    return (f"triton model {model} serves {_words(served, keys)}, while the inventory and the record "
            f"({WINDOW_RECORD}) want {_words(wanted, keys)}: a configuration loaded on the running server that "
            f"nothing records (a tune cut short?); load the model's own back on the host: touch "
            f"{repo}/{model}/config.pbtxt && curl -sX POST {base}/v2/repository/models/{model}/load, or restart "
            "Triton")


def serving_matches(base: str, repo: str, configs: dict[str, str], *, needs: Expect | None = None) -> Expect:
    """The audit item: every model of ``configs`` (``{model: rendered config.pbtxt}``) served as rendered,
    read from Triton's HTTP API at ``base`` on the host itself (``repo``: its model repository)."""
    wanted = {m: rendered_serving(text) for m, text in sorted(configs.items())}
    read = "\n".join(sh("printf '%%s\\n' %s; curl -s --max-time 5 %s || true; echo", MARK + m,
                        f"{base}/v2/models/{m}/config") for m in wanted) or "true"

    def judge(out: str) -> str | None:
        answers: dict[str, list[str]] = {}
        current: list[str] | None = None
        for line in out.splitlines():
            if line.startswith(MARK):
                current = answers.setdefault(line[len(MARK):], [])
            elif current is not None:
                current.append(line)
        bad = []
        for m, want in wanted.items():
            text = "\n".join(answers.get(m, [])).strip()
            try:
                doc = json.loads(text)
                if not isinstance(doc, dict) or "error" in doc:
                    raise ValueError(doc)
                served = serving_of(doc)
            except (ValueError, TypeError, AttributeError):
                bad.append(f"triton model {m}: its configuration could not be read from {base}/v2/models/{m}/config "
                           f"({said(text, 200) or 'no answer'})")
                continue
            line = served_differs(m, served, want, repo, base)
            if line:
                bad.append(line)
        return "; ".join(bad) or None

    return Expect("triton models serve their configuration", read, judge, needs=needs)
