"""Test harness of bringup: throwaway systemd hosts in Docker containers, reachable over real SSH.

It lives in the checkout, next to ``bringup/``, and does not ship with the
package: the integration tests, ``bench/`` and ``invoke sandbox`` (run from a
checkout) use it.

The sandbox is what the integration tests and ``invoke sandbox`` provision
against: each host is a Debian bookworm (or, with ``BRINGUP_SANDBOX_SUITE=trixie``,
Debian 13 trixie) container booted with systemd as PID 1 and sshd published on a random port of 127.0.0.1::

    ensure_docker()
    remove_leftovers()
    image = build_image()                 # cached by recipe hash
    host = start_host("web1", workdir=Path(".sandbox/run"))
    host.exec("systemctl is-system-running")
    write_inventory(Path("inventory.yml"), [host])

No registry is reachable where this runs, so the image is not pulled but
built from the Debian mirror with ``debootstrap`` and ``docker import``-ed.
Its tag is a hash of the recipe (suite, packages, configuration script), so
an unchanged recipe reuses the image in about a second.

SSH trust is never "accept whatever answers": host keys are generated at
each container's first boot, read back over ``docker exec`` (a second
channel), and written to a known_hosts file that clients use with strict
host key checking.

Every failure raises :class:`SandboxError` with one line that says what to do.

Modules, by concern:

- :mod:`harness.common`: labels, :class:`SandboxError`, logging, the state directory
- :mod:`harness.docker`: ``docker`` calls, :func:`ensure_docker` (starts ``dockerd``)
- :mod:`harness.recipe`: what the image is made of, :class:`ImageRecipe` (its hash is the tag)
- :mod:`harness.mirror`: this machine's Debian mirror from its apt sources
- :mod:`harness.image`: :func:`build_image` (debootstrap, chroot, ``docker import``)
- :mod:`harness.lock`: the build lock shared by concurrent test runs
- :mod:`harness.keys`: the client key pair, host keys pinned in known_hosts
- :mod:`harness.limits`: :func:`make_room`: inotify instances and watches (raised as root), memory, disk
- :mod:`harness.doubles`: the test doubles (apt mirrors of stand-in packages, the dcgm-exporter double, a local Triton)
- :mod:`harness.host`: :class:`SandboxHost`, :func:`start_host`, :func:`remove_leftovers`
- :mod:`harness.inventory`: :func:`write_inventory`
- :mod:`harness.triton_image`: the CPU Triton TEST DOUBLE image (tritonserver from PyPI's nvidia-pytriton wheel)
- :mod:`harness.example`: the sandbox's example model and its inventory variables
- :mod:`harness.captures`: parsers of captured command output that only the tests read
"""
from __future__ import annotations

from .common import LABEL, NAME_LABEL, SESSION, SESSION_LABEL, SandboxError, state_dir
from .docker import ensure_docker
from .host import SandboxHost, remove_leftovers, remove_session_hosts, start_host
from .image import build_image
from .inventory import SANDBOX_VARS, write_inventory
from .limits import LimitError, make_room
from .mirror import debian_mirror
from .recipe import SUITE_ENV, SUITES, ImageRecipe, image_recipe, sandbox_suite

__all__ = [
    "SandboxError",
    "LimitError",
    "make_room",
    "ImageRecipe",
    "SandboxHost",
    "LABEL",
    "NAME_LABEL",
    "SESSION_LABEL",
    "SESSION",
    "state_dir",
    "debian_mirror",
    "ensure_docker",
    "image_recipe",
    "sandbox_suite",
    "SUITES",
    "SUITE_ENV",
    "build_image",
    "remove_leftovers",
    "remove_session_hosts",
    "start_host",
    "write_inventory",
    "SANDBOX_VARS",
]
