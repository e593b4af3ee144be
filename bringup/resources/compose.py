"""A Docker Compose project that runs a given revision of its files."""
from __future__ import annotations

from ..command import sh
from .base import Plan, Resource, kv_lines

__all__ = ["ComposeUp", "COMPOSE", "REVISION_LABEL"]

#: The label a managed compose file puts on its containers; its value names the revision of the files.
REVISION_LABEL = "bringup.revision"

#: Picks Compose v2 (the docker CLI plugin) or v1 (docker-compose), in $dc.
COMPOSE = ('if docker compose version >/dev/null 2>&1; then dc="docker compose"; '
           'elif command -v docker-compose >/dev/null 2>&1; then dc=docker-compose; else dc=; fi')


class ComposeUp(Resource):
    """``docker compose up -d`` unless ``container`` already runs ``revision``.

    The compose file labels the container with :data:`REVISION_LABEL`, a hash
    of everything it serves; a new revision changes the label, so compose
    recreates the container, and an unchanged one is left running.

        ComposeUp("/opt/triton/docker-compose.yml", project="triton", container="triton", revision=rev)
    """

    kind = "compose"

    def __init__(self, file: str, *, project: str, container: str, revision: str, notify=()):
        super().__init__(f"{project}:{container}", notify=notify)
        self.file, self.project, self.container, self.revision = file, project, container, revision

    def read(self) -> str:
        fmt = "state={{.State.Status}}\nrevision={{index .Config.Labels \"%s\"}}" % REVISION_LABEL
        return COMPOSE + "\necho \"compose=${dc:-none}\"\n" + sh(
            "docker inspect --format %s -- %s 2>/dev/null || echo state=absent", fmt, self.container)

    def plan(self, current: str) -> Plan:
        st = kv_lines(current)
        state, rev = st.get("state", "absent"), st.get("revision", "")
        if rev == "<no value>":
            rev = ""
        if state == "running" and rev == self.revision:
            return Plan.noop(f"{self.container} runs revision {rev} ({st.get('compose')})")
        up = "\n".join([
            COMPOSE,
            '[ -n "$dc" ] || { echo "neither docker compose (v2) nor docker-compose (v1) is installed" >&2; exit 1; }',
            sh("$dc -f %s -p %s up -d --remove-orphans", self.file, self.project),
        ])
        old = f"{state} {rev}".strip() if state != "absent" else "absent"
        return Plan(commands=[up], changes={"container": (old, f"running {self.revision}")})
