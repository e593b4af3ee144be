"""The GPU host model: what a host's hardware should be and whether it is healthy.

- :mod:`.gpu`, :mod:`.gpu_profiles`: GPU classes and their profiles (``bringup/data/gpu_profiles.yaml``);
- :mod:`.topology`, :mod:`.topology_svg`: the CPU/GPU/NIC topology planner and its picture;
- :mod:`.health`, :mod:`.nvlink`: health lines (Xid, ECC, NVLink, fabric) from the host's outputs;
- :mod:`.driver_matrix`, :mod:`.platform`: driver/CUDA/Triton versions and firmware/platform rules.

May import: leaves, inventory, ssh, latency, facts, resources.
(``leaves``: the shared modules at bringup/'s top. The layer order, lowest first, is
tests/unit/test_wings.py's ``LAYERS``: it fails on an import of a higher wing or a circle.)
"""
