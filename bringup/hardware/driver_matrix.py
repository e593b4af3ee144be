"""What a Triton image needs of the NVIDIA driver, from the version matrix (``bringup/data/version_matrix.yaml``).

One reading for the roles that decide on it: the ``triton`` role's checklist line (the container against the
loaded driver and the GPUs) and the ``nvidia_driver`` role (whether a loaded branch may be kept, whether a branch
it would install can run the image).  :func:`unsupported_gpus` holds the host's GPUs against the release's
architectures (an image too old for Blackwell, say).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..secrets import HIDDEN, MASK

__all__ = ["TritonNeed", "triton_need", "version_key", "architecture_of", "unsupported_gpus"]

#: A compute capability's major (or major.minor) → the architecture family NVIDIA's notes name.
_ARCH_BY_CC = {"6": "Pascal", "7.0": "Volta", "7.2": "Volta", "7.5": "Turing", "8.0": "Ampere", "8.6": "Ampere",
               "8.7": "Ampere", "8.9": "Ada Lovelace", "9": "Hopper", "10": "Blackwell", "11": "Blackwell",
               "12": "Blackwell"}


def version_key(v: str) -> tuple[int, ...]:
    """``535.86`` → ``(535, 86)``: versions compared number by number."""
    return tuple(int(x) for x in re.findall(r"[0-9]+", v))


@dataclass(frozen=True)
class TritonNeed:
    """The driver a Triton release needs: ``min_branch`` and up, or an older data-center branch at ``compat``'s
    minimum version (CUDA's forward-compatibility package)."""

    release: str
    cuda: str
    min_branch: int
    compat: dict[int, str] = field(default_factory=dict)
    min_compute_capability: str | None = None
    #: The architecture families the release's notes support ("GPU Requirements"); empty: not in the matrix.
    architectures: tuple[str, ...] = ()
    source: str | None = None
    #: The image named holds a secret (a vaulted ``triton_image``): its release and CUDA version are parts of the
    #: secret, never shown (only the driver branch it needs, what the operator acts on).
    secret: bool = False

    @property
    def shown_release(self) -> str:
        return f"{HIDDEN} (vaulted triton_image)" if self.secret else self.release

    @property
    def label(self) -> str:
        cuda = "" if self.secret else f" (CUDA {self.cuda})"
        return f"Triton {self.shown_release}{cuda} needs R{self.min_branch}+"

    def meets(self, driver: str) -> str | None:
        """How the loaded ``driver`` (``550.90.07``) runs this release: ``""`` (its branch is new enough), a
        phrase for forward compatibility; None when it cannot."""
        from ..facts.driver import driver_branch

        branch = driver_branch(driver)  # None for what is no driver version: never a branch of its leading digits
        if branch is None:
            return None
        if branch >= self.min_branch:
            return ""
        if branch in self.compat and version_key(driver) >= version_key(self.compat[branch]):
            return f" through data-center forward compatibility (R{branch} ≥ {self.compat[branch]})"
        return None

    def branch_meets(self, branch: int) -> bool:
        """Whether a branch to install (its newest release) runs this release."""
        return branch >= self.min_branch or branch in self.compat


def architecture_of(gpu: dict) -> str | None:
    """A GPU's architecture family: ``nvidia-smi -q``'s Product Architecture, else the query CSV's compute
    capability mapped to its family (``9.0`` → Hopper); None when neither is known."""
    arch = gpu.get("product_architecture")
    if arch:
        return str(arch)
    cc = str(gpu.get("compute_cap") or "")
    return _ARCH_BY_CC.get(cc) or _ARCH_BY_CC.get(cc.split(".")[0]) if cc else None


def unsupported_gpus(need: TritonNeed, facts: dict) -> str | None:
    """Why ``need``'s release cannot run on this host's GPUs (in words, with the matrix's source), or None.

    Each GPU's architecture (``nvidia.query``, else ``nvidia.smi``'s compute capability) must be one the
    release supports, and its compute capability at least the release's floor."""
    query = (facts.get("nvidia.query") or {}).get("gpus") or []
    smi = facts.get("nvidia.smi") or []
    caps = {g.get("pci_address"): g.get("compute_cap") for g in smi if g.get("compute_cap")}
    gpus = [{**g, "compute_cap": caps.get(g.get("pci_address"))} for g in query] or list(smi)
    bad: dict[str, list[str]] = {}
    for g in gpus:
        arch, cc = architecture_of(g), g.get("compute_cap")
        name = str(g.get("product_name") or g.get("name") or "GPU")
        if arch and need.architectures and arch not in need.architectures:
            bad.setdefault(f"{name} ({arch})", [])
        elif cc and need.min_compute_capability and version_key(str(cc)) < version_key(need.min_compute_capability):
            bad.setdefault(f"{name} (compute capability {cc})", [])
    if not bad:
        return None
    supports = ", ".join(need.architectures) or f"compute capability {need.min_compute_capability}+"
    if need.secret:  # the architectures a release supports tell the release
        supports = "other GPU architectures"
    return (f"Triton {need.shown_release} supports {supports} ({need.source or 'bringup/data/version_matrix.yaml'}); "
            f"this host has {', '.join(bad)}")


def triton_need(image: object) -> TritonNeed | None:
    """The matrix's entry for ``image``'s release (``…/tritonserver:24.06-py3``); None: no image, no
    ``YY.MM`` tag, or a release the matrix does not know.  An image that is a secret itself (vaulted, or rendered
    from a vaulted value: templating keeps it :class:`~bringup.secrets.Vaulted`) gives a need marked
    :attr:`TritonNeed.secret`: its words never show the release.  A short secret that merely appears in an
    ordinary image's name (a vaulted ``nvidia`` elsewhere) does not: the release shown is no part of it."""
    from ..checks import load_matrix

    m = re.search(r":([0-9][0-9]\.[0-9][0-9])", str(image or ""))
    rel = (load_matrix().get("triton") or {}).get(m.group(1)) if m else None
    if not rel:
        return None
    return TritonNeed(m.group(1), str(rel.get("cuda", "?")), int(rel["min_driver"]),
                      {int(k): str(v) for k, v in (rel.get("datacenter_compat") or {}).items()},
                      rel.get("min_compute_capability"), tuple(rel.get("gpu_architectures") or ()),
                      rel.get("source"), secret=MASK.is_secret(image))
