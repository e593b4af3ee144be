"""Measured acceptance (issue 31 part 2): does each GPU of a host move data at the rate its hardware allows?

- :mod:`.probe`: the one standard-library file shipped to the host and run there (CUDA driver API through
  ctypes): copy bandwidths, peer-to-peer copies, a short load with nvidia-smi read meanwhile; one JSON document.
- :mod:`.limits`: the limits (PCIe per generation and width, NVLink per link, the GPU class's memory
  bandwidth from :mod:`bringup.hardware.gpu_profiles`) and the inventory's ``accept_thresholds``.
- :mod:`.judge`: the probe's JSON against the limits, as checklist lines (area ``acceptance``).
- :mod:`.dcgm`: ``dcgmi diag -j`` as checklist lines.
- :mod:`.serving`: whether Triton is serving requests (the task refuses to load a serving host).
- :mod:`.saved`: the results saved per host, the newest read back for the rack checklist, the metrics.
- :mod:`.remote`: the run on one host over a transport (:mod:`bringup.ssh.connection`).

The task ``invoke accept`` (:mod:`bringup.tasks.accept`) composes them.

May import: leaves, inventory, ssh, latency, facts, resources, hardware, engine.
(``leaves``: the shared modules at bringup/'s top. The layer order, lowest first, is
tests/unit/test_wings.py's ``LAYERS``: it fails on an import of a higher wing or a circle.)
"""
