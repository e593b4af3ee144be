"""A JSON file merged with wanted keys, never replaced: other keys stay as they are.

``/etc/docker/daemon.json`` is the case in point: log options, registry
mirrors or a data-root someone set by hand survive bringup adding a runtime.

Two promises for a file a service restarts on:

- ``check``: the merged document is shown to the service's own checker on the host before the file is
  replaced (``dockerd --validate``); a document it refuses is never written, and the run fails with the
  checker's words.
- ``owned``: bringup records which keys it merged (``/var/lib/bringup/json/<path>.keys``, a sha256 of each
  value), so a key the inventory no longer asks for is removed again, when its value is still the one
  bringup wrote; a key bringup never wrote is never removed.
"""
from __future__ import annotations

import base64
import hashlib
import json
from typing import Any, Callable

from ..ssh.command import sh
from ..errors import InputError
from .base import Plan, Resource, kv_lines
from .files import backup, prune_backups, write_file
from ..untrusted import loads

__all__ = ["JsonFile", "merge", "contains", "RECORD_DIR"]

#: Files larger than this are refused (a daemon.json is a few hundred bytes).
SIZE_LIMIT = 1024 * 1024

#: Where the keys bringup merged into a file are recorded (``owned=True``): ``<RECORD_DIR><path>.keys``.
RECORD_DIR = "/var/lib/bringup/json"


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

        JsonFile("/etc/docker/daemon.json", {"log-driver": "json-file"}, notify=["restart docker"],
                 check=dockerd_check, owned=True)

    ``command``: a shell command that makes the change instead of bringup
    writing the merge itself (``nvidia-ctk runtime configure``); it runs only
    when the file lacks the keys, and the re-read checks that it added them.
    The replaced file is kept as ``<path>.<timestamp>.bak`` either way (the newest
    ``files.BACKUP_KEEP``); a failed write leaves no temporary file.
    Invalid JSON on the host is an error, never overwritten.

    ``check``: ``check(document)`` returns a shell snippet that exits non-zero, printing why, when the
    service would refuse the merged document; it runs on the host before the file is replaced.
    ``owned``: record the keys merged and remove those ``keys`` no longer holds (see the module);
    ``keys`` may then be empty (nothing wanted, earlier keys removed).
    """

    kind = "json"

    def __init__(self, path: str, keys: dict[str, Any], *, command: str | None = None, indent: int = 4,
                 mode: str = "0644", notify=(), check: Callable[[dict], str] | None = None,
                 owned: bool = False, record_dir: str = RECORD_DIR):
        if not path.startswith("/") or "\n" in path:
            raise InputError(f"json file path {path!r} must be absolute")
        if not isinstance(keys, dict) or not (keys or owned):
            raise InputError(f"{path}: the keys to merge must be a non-empty mapping")
        if owned and command:
            raise InputError(f"{path}: a file changed by a command cannot record the keys bringup merged")
        check_json(keys, f"{path}: the keys to merge")
        super().__init__(path, notify=notify)
        self.path, self.keys, self.command, self.indent, self.mode = path, keys, command, indent, mode
        self.check, self.owned = check, owned
        self.record_path = record_dir.rstrip("/") + path + ".keys"

    def read(self) -> str:
        out = sh(
            "p=%s\n"
            "if [ -L \"$p\" ] && [ ! -e \"$p\" ]; then echo type=dangling\n"
            "elif [ -f \"$p\" ]; then echo type=file; printf 'size='; stat -c %%s -- \"$p\"\n"
            "  if [ \"$(stat -c %%s -- \"$p\")\" -le %s ]; then printf 'content='; base64 -w0 -- \"$p\"; echo; fi\n"
            "elif [ -e \"$p\" ]; then echo type=other\n"
            "else echo type=absent; fi",
            self.path, SIZE_LIMIT,
        )
        if self.owned:
            out += "\n" + sh("if [ -f %s ]; then printf 'record='; head -c %s -- %s | base64 -w0; echo; fi",
                              self.record_path, SIZE_LIMIT, self.record_path)
        return out

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
                    have = loads(text, what="its content")
                except ValueError as e:
                    return Plan.fail(f"{self.path} is not valid JSON ({e}); fix or move it away, "
                                     "it is never overwritten")
                if not isinstance(have, dict):
                    return Plan.fail(f"{self.path} holds JSON but not an object; fix or move it away")
        if self.owned:
            return self._plan_owned(have, st.get("record"))
        if contains(have, self.keys):
            return Plan.noop(f"{self.path} already has " + ", ".join(_paths(self.keys)))
        changes = {k: (_get(have, k), _get(self.keys, k)) for k in _paths(self.keys)
                   if not contains(_at(have, k), _at(self.keys, k))}
        if self.command:
            # The backup first (a failed copy stops the script), pruned to the newest, then the command.
            return Plan(commands=["\n".join(["set -e", backup(self.path), prune_backups(self.path)]), self.command],
                        changes=changes)
        return self._plan_write(merge(have, self.keys), changes)

    def _plan_write(self, doc: dict, changes: dict, then: tuple[str, ...] = ()) -> Plan:
        """The service's check of ``doc`` (when given: a command of its own, before anything is owed or
        written), then the atomic write, then ``then``."""
        check_json(doc, f"{self.path} merged with what the host has")
        data = (json.dumps(doc, indent=self.indent, sort_keys=False, allow_nan=False) + "\n").encode()
        write = write_file(self.path, data, mode=self.mode, keep_backup=True)
        checks = [] if self.check is None else ["set -e\n" + self.check(doc)]
        return Plan(commands=[*checks, write, *then], changes=changes, checks=len(checks))

    def _plan_owned(self, have: dict, record_b64: str | None) -> Plan:
        """Merge ``keys``, remove the keys bringup merged earlier that ``keys`` no longer holds, keep the record."""
        earlier = _load_record(record_b64)
        wanted = _leaves(self.keys)
        stale = [k for k, digest in earlier.items()
                 if k not in wanted and _has(have, k) and _digest(_walk(have, k)) == digest]
        doc = merge(_without(have, stale), self.keys)
        changes: dict[str, tuple[Any, Any]] = {".".join(k): (_walk(have, k), "absent (bringup had set it)")
                                               for k in stale}
        changes.update({".".join(k): (_walk(have, k) if _has(have, k) else "absent", v)
                        for k, v in wanted.items() if not (_has(have, k) and _walk(have, k) == v)})
        record = {k: _digest(v) for k, v in wanted.items()}
        keep: tuple[str, ...] = ()
        if record != earlier or (record_b64 is not None and not record):
            keep = (sh("rm -f -- %s", self.record_path) if not record else
                    write_file(self.record_path, _dump_record(record), mode="0600"),)
        if doc != have:
            return self._plan_write(doc, changes, keep)
        if keep:
            # Only bringup's record changes (a file an older bringup merged): nothing for the service to reload.
            return Plan(commands=list(keep), changes={f"{self.record_path}": ("out of date", "the keys merged")},
                        notifies=False)
        if not self.keys:
            return Plan.noop(f"no keys to merge into {self.path}, none merged earlier")
        return Plan.noop(f"{self.path} already has " + ", ".join(_paths(self.keys)))


def _leaves(keys: dict, prefix: tuple = ()) -> dict[tuple, Any]:
    """``keys`` as ``{(key, subkey, ...): value}``, objects walked down to their non-object values."""
    out: dict[tuple, Any] = {}
    for k, v in keys.items():
        if isinstance(v, dict) and v:
            out.update(_leaves(v, (*prefix, k)))
        elif v is not None:
            out[(*prefix, k)] = v
    return out


def _has(doc: Any, path: tuple) -> bool:
    for k in path:
        if not isinstance(doc, dict) or k not in doc:
            return False
        doc = doc[k]
    return True


def _walk(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _without(doc: dict, paths: list[tuple]) -> dict:
    """``doc`` less the values at ``paths``; an object left empty by that goes too."""
    out = json.loads(json.dumps(doc))
    for path in paths:
        chain = [out]
        for k in path[:-1]:
            chain.append(chain[-1][k])
        del chain[-1][path[-1]]
        for parent, k in zip(reversed(chain[:-1]), reversed(path[:-1])):
            if parent[k] == {}:
                del parent[k]
    return out


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _dump_record(record: dict[tuple, str]) -> bytes:
    return (json.dumps([[list(k), d] for k, d in sorted(record.items())]) + "\n").encode()


def _load_record(b64: str | None) -> dict[tuple, str]:
    """The record a run wrote; unreadable (cut short, edited): none, so nothing is removed."""
    if not b64:
        return {}
    try:
        rows = loads(base64.b64decode(b64), what="the record")
        return {tuple(k): d for k, d in rows if isinstance(d, str) and all(isinstance(x, str) for x in k) and k}
    except (ValueError, TypeError):
        return {}


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
