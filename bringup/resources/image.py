"""A container image on the host: pulled from its registry, or pushed from the control machine.

``source="push"`` is for hosts that cannot reach a registry: ``docker save``
on the control machine is streamed over the SSH connection into
``docker load`` on the host, and skipped when the host already has the same
image ID.
"""
from __future__ import annotations

import re
from typing import Literal

from ..child import capture
from ..ssh.command import sh
from ..errors import InputError
from ..inventory.vars import RoleVars, defaults_of, want
from .base import Plan, Resource, Upload, kv_lines

__all__ = ["DockerImage", "local_image_id"]

_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
_ID = re.compile(r"^sha256:[0-9a-f]{64}$")


class ImageVars(RoleVars):
    """Shared by the roles that run images (each includes it in its ``Vars``): ``pull`` on the host,
    or ``push`` from the control machine."""

    image_transfer: Literal["pull", "push"] = want("pull", "must be pull or push")


DEFAULTS = defaults_of(ImageVars)

def local_image_id(ref: str) -> str | None:
    """The image ID of ``ref`` on the control machine, None when it has no such image (or no docker)."""
    try:
        cp = capture(["docker", "image", "inspect", "--format", "{{.Id}}", "--", ref], timeout=30, cap=4096)
    except OSError:
        return None
    out = cp.out.decode("utf-8", "replace").strip()
    return out if cp.rc == 0 and _ID.match(out) else None


class DockerImage(Resource):
    """Image ``ref`` present on the host.

        DockerImage("nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04", source="push")

    ``image_id`` (``sha256:...``) pins the content: a host image with another
    ID is replaced.  With ``push`` the control machine's image ID is the pin.
    """

    kind = "image"
    read_alongside = True

    def __init__(self, ref: str, *, source: str = "pull", image_id: str | None = None, retries: int = 3,
                 notify=()):
        if not isinstance(ref, str) or not _REF.match(ref):
            raise InputError(f"image reference {ref!r} is malformed")
        if source not in ("pull", "push"):
            raise InputError(f"image {ref}: image_transfer {source!r} must be pull or push")
        if image_id is not None and not _ID.match(str(image_id)):
            raise InputError(f"image {ref}: image id {image_id!r} must be sha256:<64 hex digits>")
        super().__init__(ref, notify=notify)
        self.ref, self.source, self.image_id, self.retries = ref, source, image_id, int(retries)
        self._local: str | None | bool = False

    def local_id(self) -> str | None:
        if self._local is False:
            self._local = local_image_id(self.ref)
        return self._local  # type: ignore[return-value]

    def read(self) -> str:
        return sh("command -v docker >/dev/null 2>&1 || { echo docker=missing; exit 0; }\n"
                  "printf 'id='; docker image inspect --format '{{.Id}}' -- %s 2>/dev/null || echo", self.ref)

    def plan(self, current: str) -> Plan:
        st = kv_lines(current)
        if st.get("docker") == "missing":
            return Plan.fail(f"{self.ref}: docker is not installed on this host (run the docker role first)")
        have = st.get("id", "").strip() or None
        if self.source == "push":
            local = self.local_id()
            if local is None:
                return Plan.fail(f"image {self.ref} is not on the control machine: docker pull or docker load it "
                                 "there first (image_transfer: push sends the control machine's copy)")
            if self.image_id and local != self.image_id:
                return Plan.fail(f"image {self.ref} on the control machine is {local[:19]}, not the pinned "
                                 f"{self.image_id[:19]}")
            if have == local:
                return Plan.noop(f"host already has {self.ref} ({local[:19]})")
            return Plan(changes={"image": (have[:19] if have else "absent", f"{local[:19]} pushed")},
                        upload=Upload(["docker", "save", self.ref], "docker load", what=f"docker save {self.ref}"))
        if have and (not self.image_id or have == self.image_id):
            return Plan.noop(f"host has {self.ref} ({have[:19]})")
        pull = sh("n=0; until docker pull -q -- %s; do n=$((n+1)); [ \"$n\" -lt %s ] || exit 1; sleep 3; done",
                  self.ref, self.retries)
        cmds = [pull]
        if self.image_id:
            cmds.append(sh("got=$(docker image inspect --format '{{.Id}}' -- %s); [ \"$got\" = %s ] || "
                           "{ echo \"pulled %s is $got, not the pinned %s\"; exit 1; }",
                           self.ref, self.image_id, self.ref, self.image_id))
        return Plan(commands=cmds, changes={"image": (have[:19] if have else "absent", self.image_id or "pulled")})
