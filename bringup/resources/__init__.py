"""Declarative, idempotent resources (read → plan → apply).

May import: leaves, inventory, ssh, latency, facts.
(``leaves``: the shared modules at bringup/'s top. The layer order, lowest first, is
tests/unit/test_wings.py's ``LAYERS``: it fails on an import of a higher wing or a circle.)
"""
from .base import Plan, Resource
from .command import Command
from .files import Directory, File
from .packages import Packages
from .sysctl import Sysctl
from .systemd import Service
from .apt import AptRepository
from .guard import Fail, Probe, Skip
from .hold import Hold
from .image import DockerImage
from .jsonfile import JsonFile
from .trt import TrtEngine
from .upload import UploadedFile

__all__ = ["Plan", "Resource", "File", "Directory", "Sysctl", "Packages", "Service", "Command",
           "AptRepository", "Hold", "JsonFile", "DockerImage", "Skip", "Fail", "Probe",
           "TrtEngine", "UploadedFile"]
