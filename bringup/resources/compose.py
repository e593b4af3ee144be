"""A Docker Compose project that runs a given revision of its files."""
from __future__ import annotations

from ..ssh.command import sh
from .base import Plan, Resource, kv_lines

__all__ = ["ComposeUp", "COMPOSE", "REVISION_LABEL", "PROJECT_LABEL", "label_format", "revision_hash"]

#: The label a managed compose file puts on its containers; its value names the revision of the files.
REVISION_LABEL = "bringup.revision"
#: The label both compose v1 and v2 put on a project's containers.
PROJECT_LABEL = "com.docker.compose.project"



def revision_hash(base: str, parts=(), length: int = 12) -> str:
    """The revision a managed container is labelled with: SHA-256 of ``base`` (the unit or compose text
    rendered with an empty revision), then of each ``(label, data)`` part (``\\0label\\0data``: files shipped
    with it, their text or raw digest), cut to ``length`` hex digits.  One formula for every role, so that
    a revision changes exactly when what the container runs from does.
    """
    import hashlib

    h = hashlib.sha256(base.encode())
    for label, data in parts:
        h.update(b"\0" + label.encode() + b"\0" + (data if isinstance(data, bytes) else data.encode()))
    return h.hexdigest()[:length]


def label_format(label: str) -> str:
    """``docker inspect --format`` text printing a container's ``label``."""
    return '{{index .Config.Labels "%s"}}' % label


#: Picks Compose v2 (the docker CLI plugin) or v1 (docker-compose), in $dc.
COMPOSE = ('if docker compose version >/dev/null 2>&1; then dc="docker compose"; '
           'elif command -v docker-compose >/dev/null 2>&1; then dc=docker-compose; else dc=; fi')


def _leftover_pattern(container: str) -> str:
    """ERE of the names compose gives a container it renamed while recreating it: ``<12 hex>_<name>``.

    Compose v1 renames the old container first and leaves it so (still
    running) when creating the new one fails; v2 does the same when stopping,
    creating or starting fails half-way.
    """
    return "^[0-9a-f]{12}_" + "".join(f"[{c}]" if c == "." else c for c in container) + "$"


class ComposeUp(Resource):
    """``docker compose up -d`` unless ``container`` already runs ``revision``.

    The compose file labels the container with :data:`REVISION_LABEL`, a hash
    of everything it serves; a new revision changes the label, so compose
    recreates the container, and an unchanged one is left running.  Renamed
    leftovers of the container (``<id>_<container>``, what a recreate that
    failed half-way leaves) are removed first: compose would otherwise keep
    finding them and never converge.

        ComposeUp("/opt/triton/docker-compose.yml", project="triton", container="triton", revision=rev)
    """

    kind = "compose"
    read_alongside = True

    def __init__(self, file: str, *, project: str, container: str, revision: str, notify=()):
        super().__init__(f"{project}:{container}", notify=notify)
        self.file, self.project, self.container, self.revision = file, project, container, revision

    def read(self) -> str:
        fmt = "state={{.State.Status}}\nrevision={{index .Config.Labels \"%s\"}}" % REVISION_LABEL
        return COMPOSE + "\necho \"compose=${dc:-none}\"\n" + sh(
            "docker inspect --format %s -- %s 2>/dev/null || echo state=absent\n"
            # Only containers a bringup compose file made (they carry its revision label): a
            # container of the same shape of name that someone else made is not ours to remove.
            "docker ps -a --filter label=%s --format '{{.Names}}' 2>/dev/null | grep -E -- %s "
            "| sed 's/^/leftover=/' || true",
            fmt, self.container, REVISION_LABEL, _leftover_pattern(self.container))

    def plan(self, current: str) -> Plan:
        st = kv_lines(current)
        state, rev = st.get("state", "absent"), st.get("revision", "")
        leftovers = [l[9:] for l in current.splitlines() if l.startswith("leftover=")]
        if rev == "<no value>":
            rev = ""
        if state == "running" and rev == self.revision and not leftovers:
            return Plan.noop(f"{self.container} runs revision {rev} ({st.get('compose')})")
        cmds, changes = [], {}
        if leftovers:
            cmds.append(sh("docker rm -f -- " + " ".join(["%s"] * len(leftovers)), *leftovers))
            changes["leftovers"] = (leftovers, "removed")
        if not (state == "running" and rev == self.revision):
            cmds.append(self._up())
            old = f"{state} {rev}".strip() if state != "absent" else "absent"
            changes["container"] = (old, f"running {self.revision}")
        return Plan(commands=cmds, changes=changes)

    def _up(self) -> str:
        return "\n".join([
            COMPOSE,
            '[ -n "$dc" ] || { echo "neither docker compose (v2) nor docker-compose (v1) is installed" >&2; exit 1; }',
            sh("$dc -f %s -p %s up -d --remove-orphans", self.file, self.project),
        ])

    def restore(self, revision: str | None) -> str:
        """Shell: bring the compose file up again after a failed deploy, whatever stage compose stopped at.

        Of the containers a bringup compose file made (they carry
        :data:`REVISION_LABEL`) that belong to the project or are named
        ``container`` or a renamed leftover of it, one that still runs
        ``revision`` is kept, under its own name again; every other one is
        removed; then ``up -d``.  A container without the label is never touched.  Compose v1
        leaves the old container running under a temporary name when creating
        the new one fails, v2 leaves it stopped and renamed, or a new one
        created but not started: each of these ends with ``container`` running
        the file's revision.
        """
        return "\n".join([
            "set -e",
            sh("p=%s; c=%s; want=%s; pat=%s", self.project, self.container, revision or "",
               _leftover_pattern(self.container)),
            "keep=",
            "list=$(docker ps -a --format '{{.ID}}\t{{.Names}}\t{{.State}}\t{{.Label \"%s\"}}\t"
            "{{.Label \"%s\"}}')" % (REVISION_LABEL, PROJECT_LABEL),
            "tab=$(printf '\\t')",
            'while IFS="$tab" read -r id name state rev proj; do',
            '  [ -n "$id" ] || continue',
            # Only what a bringup compose file made: its revision label. Anyone else's container stays.
            '  [ -n "$rev" ] || continue',
            '  if [ "$proj" != "$p" ] && [ "$name" != "$c" ] && ! printf %s "$name" | grep -Eq -- "$pat"; then continue; fi',
            '  if [ -z "$keep" ] && [ -n "$want" ] && [ "$state" = running ] && [ "$rev" = "$want" ]; then',
            '    keep=$id; keepname=$name',
            '  else docker rm -f -- "$id" >/dev/null; fi',
            'done <<EOF',
            '$list',
            'EOF',
            'if [ -n "$keep" ] && [ "$keepname" != "$c" ]; then docker rename -- "$keep" "$c"; fi',
            self._up(),
        ])
