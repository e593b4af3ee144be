"""The data files bringup ships read the same through libyaml's loader (bringup.shipped) as through PyYAML's own:
the fast loader changes no value of any of them."""
import importlib.resources as ilr

import pytest
import yaml

from bringup.shipped import shipped_yaml

FILES = sorted(p.name for p in ilr.files("bringup").joinpath("data").iterdir() if p.name.endswith(".yaml"))


def test_every_shipped_yaml_file_is_read_here():
    assert {"gpu_profiles.yaml", "health.yaml", "nvlink.yaml", "version_matrix.yaml"} <= set(FILES)


@pytest.mark.parametrize("name", FILES)
def test_libyaml_and_pyyaml_read_the_same_values(name):
    text = ilr.files("bringup").joinpath("data", name).read_text(encoding="utf-8")
    pure = yaml.load(text, Loader=yaml.SafeLoader)  # noqa: S506 - a safe loader
    got = shipped_yaml(name)
    assert got == pure and repr(got) == repr(pure)  # repr: the types too (1 against 1.0, True against 1)
    assert pure  # the file has content

