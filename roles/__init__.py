"""bringup's roles, one module each; ORDER is the standard order of a provision."""

ORDER = [
    "sysctl",
    "irq_affinity",
    "cpu_tuning",
    "nvidia_driver",
    "docker",
    "container_toolkit",
    "dcgm_exporter",
    "trt_engines",
    "triton",
    "window_tuner",
    "monitoring",
    "pull",
]
