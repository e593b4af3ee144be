"""Latency operations: the acceptance benchmark, client micro-batching, the batching window.

- :mod:`.target`: which Triton, model and input a ``--host`` of the inventory means.
- :mod:`.tritonstats`: Triton's own statistics, before/after deltas.
- :mod:`.loadgen`: the closed-loop load over several client processes.
- :mod:`.microbatch`: the client micro-batcher (window <= 1 ms, per-request futures).
- :mod:`.results`: a bench's tables and CSV/JSON; :mod:`.plots`: its figures; :mod:`.verdict`: the latest
  result for the checklist and its verdict; :mod:`.tune_report`: ``invoke tune``'s files and table.

May import: leaves, inventory, ssh.
(``leaves``: the shared modules at bringup/'s top. The layer order, lowest first, is
tests/unit/test_wings.py's ``LAYERS``: it fails on an import of a higher wing or a circle.)
"""

#: A request batch at most: the bench client's bound, and a served model's (``max_batch_size``, its
#: preferred sizes: bringup.hardware.gpu_profiles), so that what is served can be measured.  Here, in the package's
#: leaf, so that the role variables that bound a batch import no bench code.
MAX_BATCH = 1 << 16
