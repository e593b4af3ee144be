"""Latency operations: the acceptance benchmark, client micro-batching, the batching window.

- :mod:`.target`: which Triton, model and input a ``--host`` of the inventory means.
- :mod:`.tritonstats`: Triton's own statistics, before/after deltas.
- :mod:`.loadgen`: the closed-loop load over several client processes.
- :mod:`.microbatch`: the client micro-batcher (window <= 1 ms, per-request futures).
- :mod:`.results`: tables, CSV/JSON, plots, and the latest result for the checklist.
"""
