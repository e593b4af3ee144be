"""The run engine: roles planned and applied on hosts, and what a run leaves.

- :mod:`.runner`: a run over hosts; :mod:`.rolerun`: one role on one host; :mod:`.ahead`: connections and
  facts opened ahead of a run; :mod:`.pending`: handlers a host is owed;
- :mod:`.roles`: the roles (loading, the manifest, ``HostContext``); :mod:`.templates`: their Jinja2 templates;
  :mod:`.auditkit`: what a role promises beyond its files;
- :mod:`.results`, :mod:`.report`: what a run leaves and prints; :mod:`.drift`: the drift report;
  :mod:`.rollout`: rolling a change over a fleet.

May import: leaves, inventory, ssh, latency, facts, resources, hardware.
(``leaves``: the shared modules at bringup/'s top. The layer order, lowest first, is
tests/unit/test_wings.py's ``LAYERS``: it fails on an import of a higher wing or a circle.)
"""
