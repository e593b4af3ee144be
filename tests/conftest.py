"""Shared fixtures: real sandbox hosts (systemd containers reached over SSH).

The sandbox fixtures never skip: an integration run without Docker is a
broken machine, and a skipped suite would look green.  They fail with the
:class:`harness.SandboxError` line saying what to install.

The hosts are Debian 12 (bookworm) unless ``--sandbox-suite trixie`` (or
``BRINGUP_SANDBOX_SUITE=trixie``) picks Debian 13 for the whole run;
``sandbox_suite_host_factory`` starts a host of a given suite whatever the
run's (``tests/integration/test_releases.py`` runs a smoke of the roles on
both in every run).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Iterator

import pytest

import harness
from tests import reliability


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--sandbox-suite", choices=harness.SUITES, default=None,
                     help=f"Debian suite of the sandbox hosts (default ${harness.SUITE_ENV}, else bookworm)")
    parser.addoption("--reliability-out", default=None, metavar="PATH",
                     help="write (merge into) the reliability table at PATH, e.g. docs/RELIABILITY.md; without it "
                          "no table is written (see tests/reliability.py)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "integration: needs Docker and real sandbox hosts (slow, root)")
    suite = config.getoption("--sandbox-suite")
    if suite:
        # The tool's own subprocesses (invoke sandbox, bench) build hosts of the same suite.
        os.environ[harness.SUITE_ENV] = suite
    reliability.configure(config)


@pytest.fixture(scope="session")
def sandbox_suite() -> str:
    """The suite of this run's sandbox hosts (``--sandbox-suite``, ``$BRINGUP_SANDBOX_SUITE``, bookworm)."""
    return harness.sandbox_suite()


@pytest.fixture(scope="session")
def sandbox_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Per-session directory for the SSH key pair, known_hosts files, inventories."""
    return tmp_path_factory.mktemp("sandbox")


@pytest.fixture(scope="session")
def sandbox_images() -> Callable[[str], str]:
    """``image(suite)``: the tag of a suite's sandbox image, built (or reused from cache) once a session."""
    harness.ensure_docker()
    # Containers of an interrupted earlier run would hold ports and memory.
    harness.remove_leftovers()
    tags: dict[str, str] = {}

    def image(suite: str) -> str:
        if suite not in tags:
            tags[suite] = harness.build_image(suite=suite)
        return tags[suite]

    return image


@pytest.fixture(scope="session")
def sandbox_image(sandbox_images: Callable[[str], str], sandbox_suite: str) -> str:
    """Tag of this run's sandbox host image, built (or reused from cache) once a session."""
    return sandbox_images(sandbox_suite)


StartHost = Callable[..., harness.SandboxHost]


@pytest.fixture(scope="session")
def sandbox_host_factory(sandbox_image: str, sandbox_dir: Path) -> Iterator[StartHost]:
    """Start named sandbox hosts: ``start("web1", restart="no")``; all removed at session end."""
    started: list[harness.SandboxHost] = []

    def start(name: str, **kwargs) -> harness.SandboxHost:
        kwargs.setdefault("workdir", sandbox_dir)
        kwargs.setdefault("image", sandbox_image)
        try:
            host = harness.start_host(name, **kwargs)
        except harness.LimitError as e:
            # The machine cannot take another host (inotify, memory, disk): one line for the run, not one
            # error per test that would have used a host.
            pytest.exit(f"sandbox: {e}")  # exit 2, as an interrupted run
        started.append(host)
        return host

    start.hosts = started  # type: ignore[attr-defined]
    yield start
    for host in started:
        host.remove()


@pytest.fixture(scope="session")
def sandbox_suite_host_factory(sandbox_host_factory: StartHost, sandbox_images: Callable[[str], str]
                               ) -> StartHost:
    """Start a sandbox host of a given Debian suite: ``start("web1", "trixie")``; removed at session end."""
    def start(name: str, suite: str, **kwargs) -> harness.SandboxHost:
        return sandbox_host_factory(name, image=sandbox_images(suite), **kwargs)

    return start


@pytest.fixture(scope="module")
def sandbox_host(sandbox_host_factory: StartHost, request: pytest.FixtureRequest
                 ) -> Iterator[harness.SandboxHost]:
    """One fresh sandbox host for the whole test module, named after it."""
    base = request.module.__name__.rsplit(".", 1)[-1]
    name = re.sub(r"[^a-z0-9-]+", "-", base.lower()).strip("-")[:40] or "host"
    host = sandbox_host_factory(name)
    yield host
    host.remove()
