"""The transport to hosts: SSH connections and what runs over them.

- :mod:`.connection`: a host's connection (paramiko/Fabric, or local), its deadlines and its run lock;
- :mod:`.sshconfig`: ``ssh_config`` read safely; :mod:`.jumps`: jump host logins shared by the hosts behind them;
- :mod:`.command`: the one quoting helper; :mod:`.script`: many snippets batched into one remote script;
- :mod:`.stop`: stopping a run in order; :mod:`.runlock`: the host's run lock.

May import: leaves, inventory.
(``leaves``: the shared modules at bringup/'s top. The layer order, lowest first, is
tests/unit/test_wings.py's ``LAYERS``: it fails on an import of a higher wing or a circle.)
"""
