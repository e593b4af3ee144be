"""Host facts: each a shell command and a pure parser (see :mod:`bringup.facts.base`).

A fact class registers itself when it is defined: ``ALL_FACTS`` lists every fact class in gathering
order (definition order), ``FACTS_BY_NAME`` maps a fact's ``name`` to its class; both are read-only views
of one registry.  The modules below are imported here in gathering order; a new module of facts is added
to this list once.
"""
from __future__ import annotations

# Defining a fact registers it: the import order is the gathering order.
from . import os_, cpu, pci, net, irq, nvidia, driver, system, triton, kernel  # noqa: F401,I001
from .base import ALL_FACTS, FACTS_BY_NAME, Fact, UntrustedOutput, format_cpulist, parse_cpulist

__all__ = ["ALL_FACTS", "FACTS_BY_NAME", "Fact", "UntrustedOutput", "format_cpulist", "parse_cpulist"]
