"""Test doubles: stand-ins, named as doubles, for what cannot be reached or run here.

- :mod:`harness.doubles.debrepo`: a local apt repository of made-up .deb packages (apt and dpkg do their real work)
- :mod:`harness.doubles.nvidia_mirror`: a signed local apt mirror of packages carrying NVIDIA's real package names
- :mod:`harness.doubles.libcuda`: NVIDIA's libcuda.so.1, a C stand-in built here with gcc (``fake_libcuda.c``)
- :mod:`harness.doubles.dcgm_double`: NVIDIA's dcgm-exporter image, a static program serving /metrics
- :mod:`harness.doubles.local_triton`: a real ``tritonserver`` from PyPI's nvidia-pytriton wheel, run on this
  machine's CPU (the real server, not a double; it lives here with the stand-ins the latency tests use)

The parsers the tests use for captured outputs are in :mod:`harness.captures`.
"""
