"""bringup: bring up low-latency NVIDIA Triton inference hosts over SSH, and prove it."""
__version__ = "0.1.0"
