"""Errors that reach the operator as one line."""
from __future__ import annotations


class BringupError(Exception):
    """Bad input or an unusable environment: printed as one line, exit 1.

    The message says what is wrong, where, and how to fix it.
    """


class InventoryError(BringupError):
    """The inventory file or a variable in it is wrong."""


class InputError(BringupError):
    """A role variable or command-line value is wrong."""


class Unreachable(Exception):
    """The host could not be connected to (network, auth, host key)."""
