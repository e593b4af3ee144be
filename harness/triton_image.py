"""TEST DOUBLE of nvcr.io/nvidia/tritonserver: a CPU-only Triton image built here.

No registry is reachable where the tests run, so NGC's image cannot be
pulled.  PyPI's ``nvidia-pytriton`` 0.7.0 wheel carries a real
``tritonserver`` (2.51) with the Python backend and its bundled libraries;
this module lays them out on a debootstrap Debian bookworm root the way the
NGC image does (``/opt/tritonserver/{bin,backends,caches}``) and imports it
as ``bringup-triton-cpu-testdouble:<recipe hash>``::

    tag = build_triton_image()       # cached: a second call takes a second

The root holds ``libpython3.11`` and ``python3-numpy`` (what the Python
backend's stub for 3.11 links and imports).  NVML/DCGM warnings at start are
expected: there is no GPU.  The tag is a hash of the recipe and the wheel's
sha256, so the image is rebuilt only when either changes.
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from .common import LABEL, SandboxError, _last_line, _log, _run, state_dir
from .docker import _docker
from .image import _debootstrap, _image_exists, _import, build_root
from .lock import _lock
from .mirror import debian_mirror
from .recipe import SUITE, ImageRecipe

IMAGE_REPO = "bringup-triton-cpu-testdouble"
WHEEL = "nvidia-pytriton==0.7.0"
WHEEL_FILE = "nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl"
PYTHON = "3.11"  # bookworm's python3; picks the backend stub
PACKAGES: tuple[str, ...] = ("libpython3.11", "python3-numpy")
#: Where the wheel's tree lies in the image; its RPATHs ($ORIGIN/../../..) need the two folders side by side.
PREFIX = "/opt/pytriton"

CONFIGURE_SCRIPT = rf"""
set -eu
ln -sfn {PREFIX}/pytriton/tritonserver /opt/tritonserver
cp {PREFIX}/pytriton/tritonserver/python_backend_stubs/{PYTHON}/triton_python_backend_stub \
   {PREFIX}/pytriton/tritonserver/backends/python/
rm -rf {PREFIX}/pytriton/tritonserver/python_backend_stubs
chmod 0755 {PREFIX}/pytriton/tritonserver/bin/tritonserver \
   {PREFIX}/pytriton/tritonserver/backends/python/triton_python_backend_stub
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* /usr/share/locale/* \
    /var/log/*.log
"""

CHANGES: tuple[str, ...] = (
    f"LABEL {LABEL}.testdouble=tritonserver",
    f"ENV PATH=/opt/tritonserver/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    f"ENV LD_LIBRARY_PATH={PREFIX}/nvidia_pytriton.libs",
    "WORKDIR /opt/tritonserver",
)


def wheel_path() -> Path:
    """The nvidia-pytriton wheel, downloaded once into ``.sandbox/wheels`` by pip."""
    d = state_dir() / "wheels"
    d.mkdir(exist_ok=True)
    path = d / WHEEL_FILE
    if not path.exists():
        cp = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                             "--platform", "manylinux_2_35_x86_64", "--python-version", PYTHON,
                             "-d", str(d), WHEEL], capture_output=True, text=True, timeout=600)
        if cp.returncode != 0 or not path.exists():
            raise SandboxError(f"pip download {WHEEL} failed: {_last_line(cp.stderr or cp.stdout)}")
    return path


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def recipe(wheel: Path) -> ImageRecipe:
    # The wheel's hash rides in the script: a different wheel is a different image.
    return ImageRecipe(SUITE, "minbase", PACKAGES,
                       f"# wheel sha256 {_sha256(wheel)}\n" + CONFIGURE_SCRIPT, CHANGES)


def build_triton_image(force: bool = False) -> str:
    """Build (or reuse) the CPU Triton test-double image; return its tag."""
    wheel = wheel_path()
    r = recipe(wheel)
    tag = f"{IMAGE_REPO}:{r.digest}"
    if not force and _image_exists(tag):
        return tag
    state = state_dir()
    with _lock(state / "build.lock"):
        if not force and _image_exists(tag):
            return tag
        t0 = time.monotonic()
        with build_root(f"triton-{r.digest}") as (root, log):
            _log(f"building {tag} (TEST DOUBLE of the NGC tritonserver image) from {wheel.name}")
            _debootstrap(r, root, debian_mirror(), log)
            dest = root / PREFIX.lstrip("/")
            dest.mkdir(parents=True)
            with zipfile.ZipFile(wheel) as z:
                members = [m for m in z.namelist()
                           if m.startswith(("pytriton/tritonserver/", "nvidia_pytriton.libs/"))]
                z.extractall(dest, members)
            cp = _run(["chroot", str(root), "/bin/sh", "-s"], input=r.script, check=False, timeout=300)
            if cp.returncode != 0:
                raise SandboxError(f"triton image configuration failed: {_last_line(cp.stderr or cp.stdout)}")
            _import(root, tag, r)
            for ref in _docker("images", IMAGE_REPO, "--format", "{{.Repository}}:{{.Tag}}",
                               check=False).stdout.split():
                if ref != tag:
                    _docker("image", "rm", ref, check=False)
            size = int(_docker("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())
            _log(f"imported {tag} ({size / 1e6:.0f} MB) in {time.monotonic() - t0:.0f}s")
    return tag


if __name__ == "__main__":
    t = time.monotonic()  # python -m harness.triton_image [--force]
    print(build_triton_image(force="--force" in sys.argv), f"{time.monotonic() - t:.1f}s")
