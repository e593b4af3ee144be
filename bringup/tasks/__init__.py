"""The tasks behind ``invoke ...`` and the ``bringup`` console script, one module per family of verbs.

- :mod:`.converge`: ``provision``, ``plan``, ``engines``: converge hosts (or say what would change).
- :mod:`.inspect`: ``facts``, ``hosts``, ``topology``: what the inventory and a host say.
- :mod:`.audit`, :mod:`.checklist`, :mod:`.drift`: the answers after a bring-up.
- :mod:`.latency`: ``bench``, ``tune-window``, ``tune``; :mod:`.latency_flags`: the flags they share (no task).
- :mod:`.accept`: ``accept``: measured acceptance of GPU hosts (:mod:`bringup.acceptance`).
- :mod:`.pull`: ``pull``: on a host, converge it from a signed Git revision (:mod:`bringup.pull`).
- :mod:`.context`: what they share (the console, failures, ``--forks``, the host selection, the run's skeleton).

A task imports :mod:`.context` and the engine, never another task; :mod:`bringup.cli` collects them.

May import: leaves, inventory, ssh, latency, facts, resources, hardware, engine, acceptance, pull, checklist, testinfra.
(``leaves``: the shared modules at bringup/'s top. The layer order, lowest first, is
tests/unit/test_wings.py's ``LAYERS``: it fails on an import of a higher wing or a circle.)
"""
