"""A JSON file that holds secrets: merged like :class:`JsonFile`, kept mode 0600 root, values never shown.

Docker's client credentials (``/root/.docker/config.json``) are the case in
point: other keys and registries stay, the file is 0600 root whatever it was,
and what the plan reports (changes, ``--diff``) names the keys but shows
``********`` for every value under a secret key.
"""
from __future__ import annotations

import base64
import difflib
import json
from typing import Any

from ..ssh.command import sh
from ..secrets import HIDDEN
from .base import Plan, kv_lines
from .jsonfile import JsonFile, merge
from ..untrusted import loads

__all__ = ["PrivateJsonFile", "docker_auth"]

#: Keys whose values are credentials (Docker's config.json: auths.<registry>.*).
SECRET_KEYS = frozenset({"auth", "password", "identitytoken", "registrytoken"})
OWNER = "root:root"


def docker_auth(username: str, password: str) -> str:
    """The ``auth`` value of Docker's config.json: base64 of ``username:password``."""
    return base64.b64encode(f"{username}:{password}".encode()).decode()


def _hide(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: HIDDEN if k in SECRET_KEYS and v is not None else _hide(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_hide(v) for v in doc]
    return doc


class PrivateJsonFile(JsonFile):
    """``keys`` merged into the JSON object at ``path``, file mode 0600 owned by root.

        PrivateJsonFile("/root/.docker/config.json", {"auths": {"nvcr.io": {"auth": docker_auth(u, p)}}})

    A file already holding the keys but readable by others (or not root's) is
    fixed in place.  The folder is created 0700.
    """

    def __init__(self, path: str, keys: dict[str, Any], *, notify=(), check=None, owned: bool = False):
        super().__init__(path, keys, mode="0600", notify=notify, check=check, owned=owned)

    def read(self) -> str:
        return super().read() + "\n" + sh("p=%s; if [ -f \"$p\" ] && [ ! -L \"$p\" ]; then "
                                          "printf 'perm=%%s\\n' \"$(stat -c '%%a %%U:%%G' -- \"$p\")\"; fi",
                                          self.path)

    def plan(self, current: str) -> Plan:
        plan = super().plan(current)
        if plan.error:
            return plan
        st = kv_lines(current)
        perm = st.get("perm")
        fix = sh("chown %s -- %s && chmod 0600 -- %s", OWNER, self.path, self.path)
        if not plan.commands:
            if perm in (None, f"600 {OWNER}"):
                return plan
            return Plan(commands=[fix], changes={"mode": (perm, f"600 {OWNER}")})
        d = self.path.rsplit("/", 1)[0] or "/"
        have = self._have(st)
        changes = {k: (HIDDEN if old != "absent" else old, HIDDEN) for k, (old, _new) in plan.changes.items()}
        # The folder first (0700 when bringup makes it); the write leaves the file 0600, then root's.
        k = plan.checks  # the service's check stays first: nothing is made before it passed
        return Plan(commands=[*plan.commands[:k], sh("mkdir -p -m 0700 -- %s", d), *plan.commands[k:], fix],
                    changes=changes, diff=self._diff(have, merge(have, self.keys)), checks=k,
                    notifies=plan.notifies)

    @staticmethod
    def _have(st: dict[str, str]) -> Any:
        if "content" not in st:
            return {}
        text = base64.b64decode(st["content"]).decode("utf-8", "replace")
        return loads(text, what="its content") if text.strip() else {}

    def _diff(self, old: Any, new: Any) -> str:
        a = (json.dumps(_hide(old), indent=self.indent) + "\n").splitlines(keepends=True) if old else []
        b = (json.dumps(_hide(new), indent=self.indent) + "\n").splitlines(keepends=True)
        return "".join(difflib.unified_diff(a, b, f"{self.path} (host)", f"{self.path} (wanted)"))
