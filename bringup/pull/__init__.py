"""Pull mode: a host converging itself from a signed Git revision (``bringup pull``).

:mod:`.source` is the Git side (fetch, revision rule, Git's signature verification, a worktree per revision,
the ``current`` link), :mod:`.record` what a run leaves for the fleet to see (the JSON state, the node
exporter's textfile), :mod:`.run` one run under the host's run lock, converging through push mode's own
``provision`` over the local connection.  The task is :mod:`bringup.tasks.pull`; the role that installs it
on hosts, ``roles/pull.py``.

May import: leaves, inventory, ssh, latency, facts, resources, hardware, engine, acceptance.
(``leaves``: the shared modules at bringup/'s top. The layer order, lowest first, is
tests/unit/test_wings.py's ``LAYERS``: it fails on an import of a higher wing or a circle.)
"""
