"""The libcuda TEST DOUBLE (``fake_libcuda.c`` beside this file): a stand-in for NVIDIA's library with the few
driver API symbols the acceptance probe calls, built here with the machine's C compiler.  Its mode (``ok``,
``hang``, ...) is read from ``/run/fake_cuda_mode`` where it runs."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).resolve().with_name("fake_libcuda.c")


def build_fake_libcuda(folder: Path) -> Path:
    """``folder/libcuda.so.1`` built from :data:`SOURCE`; its path."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc, "gcc is needed to build the libcuda test double"
    out = Path(folder) / "libcuda.so.1"
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-o", str(out), str(SOURCE)], check=True, timeout=60)
    return out
