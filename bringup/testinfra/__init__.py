"""pytest-testinfra over bringup's inventory and connection.

    pytest --hosts='bringup://trt-l40s-01' site_tests/          # a host, a group, an Ansible pattern
    pytest --hosts='bringup://l40s:&rack2' --bringup-inventory=ops/hosts site_tests/

- :mod:`.backend`: the ``bringup://`` backend: commands run through bringup's own transport
  (:func:`bringup.ssh.connection.connect`), with the inventory's address, port, user, key, host keys, become and
  ``command_timeout``; ``host.backend.vars`` holds the host's merged variables.
- :mod:`.plugin`: the pytest plugin (entry point ``pytest11``) that registers the backend with testinfra,
  expands ``bringup://PATTERN`` into the inventory's hosts, and offers the ``bringup_vars`` fixture.
- :mod:`.declared`: what a role declares for a host, as data, and its check by bringup's own audit; the
  runtime of the modules :mod:`.export` writes (``invoke audit --export-testinfra DIR``).
- :mod:`.suite`: ``invoke audit --testinfra PATH``: a site's tests run per host beside the built-in audit.

May import: leaves, inventory, ssh, latency, facts, resources, hardware, engine, acceptance, pull, checklist.
(``leaves``: the shared modules at bringup/'s top. The layer order, lowest first, is
tests/unit/test_wings.py's ``LAYERS``: it fails on an import of a higher wing or a circle.)
"""

#: testinfra's URL scheme of the backend, and where its class lives (testinfra.backend.BACKENDS).
SCHEME = "bringup"
BACKEND = "bringup.testinfra.backend.BringupBackend"
#: The pytest plugin's module, and the name it is registered under (with ``-p`` or its entry point).
PLUGIN = "bringup.testinfra.plugin"


def register() -> None:
    """Make ``bringup://`` known to testinfra (``testinfra.get_host('bringup://h')`` outside pytest too)."""
    from testinfra.backend import BACKENDS

    BACKENDS.setdefault(SCHEME, BACKEND)
