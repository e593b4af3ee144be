"""Shared fixtures: real sandbox hosts (systemd containers reached over SSH).

The sandbox fixtures never skip: an integration run without Docker is a
broken machine, and a skipped suite would look green.  They fail with the
:class:`harness.SandboxError` line saying what to install.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterator

import pytest

import harness


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "integration: needs Docker and real sandbox hosts (slow, root)")


@pytest.fixture(scope="session")
def sandbox_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Per-session directory for the SSH key pair, known_hosts files, inventories."""
    return tmp_path_factory.mktemp("sandbox")


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    """Tag of the sandbox host image, built (or reused from cache) once a session."""
    harness.ensure_docker()
    # Containers of an interrupted earlier run would hold ports and memory.
    harness.remove_leftovers()
    return harness.build_image()


StartHost = Callable[..., harness.SandboxHost]


@pytest.fixture(scope="session")
def sandbox_host_factory(sandbox_image: str, sandbox_dir: Path) -> Iterator[StartHost]:
    """Start named sandbox hosts: ``start("web1", restart="no")``; all removed at session end."""
    started: list[harness.SandboxHost] = []

    def start(name: str, **kwargs) -> harness.SandboxHost:
        kwargs.setdefault("workdir", sandbox_dir)
        kwargs.setdefault("image", sandbox_image)
        host = harness.start_host(name, **kwargs)
        started.append(host)
        return host

    start.hosts = started  # type: ignore[attr-defined]
    yield start
    for host in started:
        host.remove()


@pytest.fixture(scope="module")
def sandbox_host(sandbox_host_factory: StartHost, request: pytest.FixtureRequest
                 ) -> Iterator[harness.SandboxHost]:
    """One fresh sandbox host for the whole test module, named after it."""
    base = request.module.__name__.rsplit(".", 1)[-1]
    name = re.sub(r"[^a-z0-9-]+", "-", base.lower()).strip("-")[:40] or "host"
    host = sandbox_host_factory(name)
    yield host
    host.remove()
