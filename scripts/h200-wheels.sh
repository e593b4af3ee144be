#!/usr/bin/env bash
# What the H200 scripts (h200-latency.sh, h200-tune.sh) carry to the device VM, into .whl/ (git-ignored):
#   - the Python wheels bringup needs there that its image lacks (cp312, manylinux x86-64; the versions
#     the tests here run with), installed there with pip --no-index --no-deps into /tmp/site;
#   - tritonserver-min.zip: PyPI's nvidia-pytriton 0.7.0 wheel stripped to tritonserver 2.51, its libraries,
#     the Python backend and the 3.12 backend stub (the whole wheel is 55 MB; a call carries 64 MiB in all).
# The device image already has torch, torchvision, numpy, matplotlib, jinja2, rich, pyyaml, prometheus-client,
# packaging, urllib3, typing-extensions and wrapt (/work/.library/device/KINDS.md); it can reach no registry.
# Usage (from the repository root, here, where pip reaches PyPI): bash scripts/h200-wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
PLAT=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_34_x86_64
      --platform manylinux_2_35_x86_64 --platform any -d .whl)
# bringup's own needs on the device (connection: fabric/paramiko; options and roles: pydantic; bench: tritonclient),
# regex (gpu_profiles name matches under a deadline), and grpcio/protobuf at the versions tritonclient's generated code was checked with here.
PKGS=(invoke==2.2.1 fabric==3.2.3 paramiko==5.1.0 decorator==5.2.1 Deprecated==1.3.1
      pydantic==2.13.4 pydantic_core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2
      tritonclient==2.73.0 python-rapidjson==1.25 grpcio==1.85.3 protobuf==6.33.6
      bcrypt==5.0.0 PyNaCl==1.6.2 cryptography==48.0.0 cffi==2.0.0 pycparser==3.0
      regex==2026.5.9)
python3 -m pip download -q "${PLAT[@]}" "${PKGS[@]}"

if [ ! -f .whl/tritonserver-min.zip ]; then
  WHEEL=${PYTRITON_WHEEL:-.sandbox/wheels/nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl}
  [ -f "$WHEEL" ] || python3 -m pip download -q --no-deps -d .sandbox/wheels nvidia-pytriton==0.7.0 \
    --only-binary=:all: --platform manylinux_2_35_x86_64 --python-version 3.12
  python3 - "$WHEEL" <<'PY'
import sys, zipfile
keep = ("pytriton/tritonserver/bin/", "pytriton/tritonserver/backends/", "pytriton/tritonserver/caches/",
        "pytriton/tritonserver/python_backend_stubs/3.12/", "nvidia_pytriton.libs/")
with zipfile.ZipFile(sys.argv[1]) as src, zipfile.ZipFile(".whl/tritonserver-min.zip.tmp", "w",
                                                          zipfile.ZIP_DEFLATED, compresslevel=9) as dst:
    for info in src.infolist():
        # libpython3.13 (31 MB) serves only the 3.13 stub; the 3.12 stub links the device's own libpython3.12.
        if info.filename.startswith(keep) and not info.filename.startswith("nvidia_pytriton.libs/libpython3-"):
            dst.writestr(info, src.read(info))
PY
  mv .whl/tritonserver-min.zip.tmp .whl/tritonserver-min.zip
fi
du -ch .whl/* | tail -1
