"""The data files bringup ships (``bringup/data/*.yaml``: GPU profiles, health checks, NVLink rates, the version
matrix), each read through one function.

They are bringup's own files, never an operator's: they are parsed with libyaml's safe loader where PyYAML was
built with it (``yaml.CSafeLoader``: the same safe types, in C), else PyYAML's own.  The GPU profiles alone
(~70 entries) took ~20 ms of every run's input check in pure Python, before a host is sent its first command
(tests/unit/test_shipped.py holds both loaders to the same result).  Input from operators and hosts goes through
its own hardened readers (bringup.inventory.sources.yamlfile, bringup.untrusted), never this.
"""
from __future__ import annotations

import importlib.resources as ilr
from typing import Any

__all__ = ["shipped_yaml"]


def shipped_yaml(name: str) -> Any:
    """The parsed content of ``bringup/data/<name>``."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(ilr.files("bringup").joinpath("data", name).read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - a safe loader
