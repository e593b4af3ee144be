"""One revision formula for every role's managed container (issue 9 defect 8), byte-for-byte the one each
role computed before, so that upgrading bringup recreates no running Triton, exporter or monitoring stack."""
import hashlib

from bringup.resources.compose import revision_hash


def test_compose_and_files_shape_is_the_old_triton_and_monitoring_formula():
    compose = "services:\n  triton:\n    labels: {bringup.revision: ''}\n"
    old = hashlib.sha256(compose.encode())
    old.update("\0config classify\0max_batch_size: 8\n".encode())
    old.update("\0file classify/1/model.py False\0".encode() + bytes.fromhex("ab" * 32))
    new = revision_hash(compose, [("config classify", "max_batch_size: 8\n"),
                                  ("file classify/1/model.py False", bytes.fromhex("ab" * 32))])
    assert new == old.hexdigest()[:12]


def test_unit_shape_is_the_old_dcgm_formula():
    text = "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9\nsha256:00\n9400\nDCGM_FI_DEV_GPU_UTIL, gauge, util\n"
    assert revision_hash(text, length=16) == hashlib.sha256(text.encode()).hexdigest()[:16]


def test_any_part_changes_the_revision():
    base = revision_hash("c", [("a", "1"), ("b", "2")])
    assert revision_hash("c", [("a", "1"), ("b", "3")]) != base
    assert revision_hash("c", [("a", "1"), ("c", "2")]) != base
    assert revision_hash("d", [("a", "1"), ("b", "2")]) != base
