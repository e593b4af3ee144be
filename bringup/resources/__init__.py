"""Declarative, idempotent resources (read → plan → apply)."""
from .base import Plan, Resource
from .command import Command
from .files import Directory, File
from .packages import Packages
from .sysctl import Sysctl
from .systemd import Service

__all__ = ["Plan", "Resource", "File", "Directory", "Sysctl", "Packages", "Service", "Command"]
