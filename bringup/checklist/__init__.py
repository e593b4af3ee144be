"""The answers after a bring-up: the rack checklist and the audit.

- :mod:`.pages`: the checklist's lines per host (roles, health, platform, topology, acceptance, latency);
- :mod:`.html`: its HTML pages; :mod:`.audit`: ``invoke audit``, each host against its roles' declarations.

May import: leaves, inventory, ssh, latency, facts, resources, hardware, engine, acceptance, pull.
(``leaves``: the shared modules at bringup/'s top. The layer order, lowest first, is
tests/unit/test_wings.py's ``LAYERS``: it fails on an import of a higher wing or a circle.)
"""
