"""A JSON file merged with wanted keys, never replaced: other keys stay as they are.

``/etc/docker/daemon.json`` is the case in point: log options, registry
mirrors or a data-root someone set by hand survive bringup adding a runtime.
"""
from __future__ import annotations

import base64
import json
from typing import Any

from ..command import sh
from ..errors import InputError
from .base import Plan, Resource, kv_lines
from .files import backup, prune_backups, write_file

__all__ = ["JsonFile", "merge", "contains"]

#: Files larger than this are refused (a daemon.json is a few hundred bytes).
SIZE_LIMIT = 1024 * 1024


def merge(base: Any, overlay: Any) -> Any:
    """Deep merge: objects merge key by key, anything else in ``overlay`` replaces; None deletes."""
    if not isinstance(base, dict) or not isinstance(overlay, dict):
        return overlay
    out = dict(base)
    for k, v in overlay.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k), v)
    return out


def contains(have: Any, want: Any) -> bool:
    """``have`` already holds every key of ``want`` (None: the key is absent)."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return False
        return all((k not in have) if v is None else (k in have and contains(have[k], v)) for k, v in want.items())
    return have == want


def check_json(value: Any, what: str) -> None:
    """Refuse what cannot be written as strict JSON: NaN and Infinity (Docker will not start on them), objects."""
    try:
        json.dumps(value, allow_nan=False)
    except ValueError as e:
        raise InputError(f"{what}: NaN and Infinity are not JSON ({e}); write a finite number") from None
    except TypeError as e:
        raise InputError(f"{what}: not JSON ({e})") from None


class JsonFile(Resource):
    """A JSON object file holding ``keys`` (deep-merged; a None value removes a key).

        JsonFile("/etc/docker/daemon.json", {"log-driver": "json-file"}, notify=["restart docker"])

    ``command``: a shell command that makes the change instead of bringup
    writing the merge itself (``nvidia-ctk runtime configure``); it runs only
    when the file lacks the keys, and the re-read checks that it added them.
    The replaced file is kept as ``<path>.<timestamp>.bak`` either way (the newest
    ``files.BACKUP_KEEP``); a failed write leaves no temporary file.
    Invalid JSON on the host is an error, never overwritten.
    """

    kind = "json"

    def __init__(self, path: str, keys: dict[str, Any], *, command: str | None = None, indent: int = 4,
                 mode: str = "0644", notify=()):
        if not path.startswith("/") or "\n" in path:
            raise InputError(f"json file path {path!r} must be absolute")
        if not isinstance(keys, dict) or not keys:
            raise InputError(f"{path}: the keys to merge must be a non-empty mapping")
        check_json(keys, f"{path}: the keys to merge")
        super().__init__(path, notify=notify)
        self.path, self.keys, self.command, self.indent, self.mode = path, keys, command, indent, mode

    def read(self) -> str:
        return sh(
            "p=%s\n"
            "if [ -L \"$p\" ] && [ ! -e \"$p\" ]; then echo type=dangling\n"
            "elif [ -f \"$p\" ]; then echo type=file; printf 'size='; stat -c %%s -- \"$p\"\n"
            "  if [ \"$(stat -c %%s -- \"$p\")\" -le %s ]; then printf 'content='; base64 -w0 -- \"$p\"; echo; fi\n"
            "elif [ -e \"$p\" ]; then echo type=other\n"
            "else echo type=absent; fi",
            self.path, SIZE_LIMIT,
        )

    def plan(self, current: str) -> Plan:
        st = kv_lines(current)
        kind = st.get("type")
        if kind in ("other", "dangling"):
            return Plan.fail(f"{self.path} is not a regular file ({kind})")
        have: Any = {}
        if kind == "file":
            if "content" not in st:
                return Plan.fail(f"{self.path} is larger than {SIZE_LIMIT} bytes; not a config file to merge")
            text = base64.b64decode(st["content"]).decode("utf-8", "replace")
            if text.strip():
                try:
                    have = json.loads(text)
                except ValueError as e:
                    return Plan.fail(f"{self.path} is not valid JSON ({e}); fix or move it away, "
                                     "it is never overwritten")
                if not isinstance(have, dict):
                    return Plan.fail(f"{self.path} holds JSON but not an object; fix or move it away")
        if contains(have, self.keys):
            return Plan.noop(f"{self.path} already has " + ", ".join(_paths(self.keys)))
        changes = {k: (_get(have, k), _get(self.keys, k)) for k in _paths(self.keys)
                   if not contains(_at(have, k), _at(self.keys, k))}
        if self.command:
            # The backup first (a failed copy stops the script), pruned to the newest, then the command.
            return Plan(commands=["\n".join(["set -e", backup(self.path), prune_backups(self.path)]), self.command],
                        changes=changes)
        merged = merge(have, self.keys)
        check_json(merged, f"{self.path} merged with what the host has")
        data = (json.dumps(merged, indent=self.indent, sort_keys=False, allow_nan=False) + "\n").encode()
        write = write_file(self.path, data, mode=self.mode, keep_backup=True)
        return Plan(commands=[write], changes=changes)


def _paths(keys: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in keys.items():
        p = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.extend(_paths(v, p + "."))
        else:
            out.append(p)
    return out


def _at(doc: Any, dotted: str) -> Any:
    # Keys may contain dots themselves ("log-opts" does not, registry names do): walk greedily.
    cur = doc
    parts = dotted.split(".")
    i = 0
    while i < len(parts):
        if not isinstance(cur, dict):
            return None
        for j in range(len(parts), i, -1):
            k = ".".join(parts[i:j])
            if k in cur:
                cur, i = cur[k], j
                break
        else:
            return None
    return cur


def _get(doc: Any, dotted: str) -> Any:
    v = _at(doc, dotted)
    return "absent" if v is None else v
