"""The inventory: hosts, groups and their variables, read as Ansible reads them.

- :mod:`.hosts`: the merged inventory (``Host``, ``Inventory``), ``--limit`` selection;
- :mod:`.sources`: the sources (INI, YAML, scripts, ``group_vars``/``host_vars``);
- :mod:`.vars`: the roles' typed variables (``RoleVars``); :mod:`.vault`: Ansible Vault values;
- :mod:`.patterns`: Ansible's host patterns.

May import: leaves.
(``leaves``: the shared modules at bringup/'s top. The layer order, lowest first, is
tests/unit/test_wings.py's ``LAYERS``: it fails on an import of a higher wing or a circle.)
"""
