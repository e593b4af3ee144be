"""What a Triton image needs of the NVIDIA driver, from the version matrix (``bringup/data/version_matrix.yaml``).

One reading for the roles that decide on it: the ``triton`` role's checklist line (the container against the
loaded driver) and the ``nvidia_driver`` role (whether a loaded branch may be kept, whether a branch it would
install can run the image).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["TritonNeed", "triton_need", "version_key"]


def version_key(v: str) -> tuple[int, ...]:
    """``535.86`` → ``(535, 86)``: versions compared number by number."""
    return tuple(int(x) for x in re.findall(r"\d+", v))


@dataclass(frozen=True)
class TritonNeed:
    """The driver a Triton release needs: ``min_branch`` and up, or an older data-center branch at ``compat``'s
    minimum version (CUDA's forward-compatibility package)."""

    release: str
    cuda: str
    min_branch: int
    compat: dict[int, str] = field(default_factory=dict)
    min_compute_capability: str | None = None

    @property
    def label(self) -> str:
        return f"Triton {self.release} (CUDA {self.cuda}) needs R{self.min_branch}+"

    def meets(self, driver: str) -> str | None:
        """How the loaded ``driver`` (``550.90.07``) runs this release: ``""`` (its branch is new enough), a
        phrase for forward compatibility; None when it cannot."""
        m = re.match(r"(\d+)", driver or "")
        branch = int(m.group(1)) if m else None
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


def triton_need(image: object) -> TritonNeed | None:
    """The matrix's entry for ``image``'s release (``…/tritonserver:24.06-py3``); None: no image, no
    ``YY.MM`` tag, or a release the matrix does not know."""
    from .checks import load_matrix

    m = re.search(r":(\d\d\.\d\d)", str(image or ""))
    rel = (load_matrix().get("triton") or {}).get(m.group(1)) if m else None
    if not rel:
        return None
    return TritonNeed(m.group(1), str(rel.get("cuda", "?")), int(rel["min_driver"]),
                      {int(k): str(v) for k, v in (rel.get("datacenter_compat") or {}).items()},
                      rel.get("min_compute_capability"))
