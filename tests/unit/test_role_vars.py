"""Issue 9: a role's variables are a typed model (bringup.inventory.vars); DEFAULTS come from it; errors are one line."""
from __future__ import annotations

import types
from typing import Literal

import pytest

from bringup.errors import InputError
from bringup.engine.roles import Role, load_roles, merged_defaults
from bringup.secrets import SecretStr
from bringup.inventory.vars import RoleVars, Spec, check, defaults_of, want

from .fixture_hosts import REPO

ORDER, ROLES = load_roles(REPO)


@pytest.mark.parametrize("name", ORDER)
def test_every_role_declares_a_model_and_its_defaults_come_from_it(name):
    role = ROLES[name]
    assert role.model is not None and issubclass(role.model, RoleVars), name
    assert role.defaults == defaults_of(role.model)
    # A role leaves DEFAULTS out (derived from Vars); the few kept for their tests' use say the same.
    assert getattr(role.module, "DEFAULTS", role.defaults) == role.defaults
    role.validate(merged_defaults([ROLES[r] for r in ORDER]))  # the shipped defaults pass every model


def test_a_shared_variable_is_one_field_that_roles_inherit():
    from bringup.hardware import gpu
    from bringup.resources import apt

    for name in ("nvidia_driver", "container_toolkit", "dcgm_exporter"):
        assert issubclass(ROLES[name].model, gpu.GpuVars), name
        field = ROLES[name].model.model_fields["nvidia_without_gpu"]
        assert repr(field) == repr(gpu.GpuVars.model_fields["nvidia_without_gpu"])
    assert issubclass(ROLES["docker"].model, apt.AptVars)


class _Entry(Spec):
    port: int = want(8000, "must be a TCP port number", ge=1, le=65535)


class _Vars(RoleVars):
    x_mode: Literal["a", "b"] = "a"
    x_on: bool = True
    x_entries: dict[str, _Entry] = want({}, "a mapping of name to {port}")


@pytest.mark.parametrize("bad,line", [
    ({"x_mode": "c"}, "x_mode 'c': must be a or b"),
    ({"x_on": "false"}, "x_on 'false': must be true or false (unquoted; YAML's yes/no, on/off too)"),
    ({"x_on": 1}, "x_on 1: must be true or false"),
    ({"x_entries": {"e": {"prot": 1}}}, "x_entries.e: unknown key 'prot'; did you mean 'port'?"),
    ({"x_entries": {"e": {"zzz": 1}}}, "x_entries.e: unknown key 'zzz'; known keys: port"),
    ({"x_entries": {"e": {"port": 0}}}, "x_entries.e.port 0: must be a TCP port number"),
    ({"x_entries": {"e": {"port": "80"}}}, "x_entries.e.port '80': must be a TCP port number"),
    ({"x_entries": {"e": {"port": SecretStr("s3cret")}}}, "x_entries.e.port '********': must be a TCP port"),
    ({"x_mode": "https://u:s3cret@mirror/"}, "x_mode 'https://u:********@mirror/': must be a or b"),
    ({"x_entries": ["e"]}, "x_entries ['e']: a mapping of name to {port}"),
])
def test_a_validation_error_is_one_line_naming_variable_value_and_want(bad, line):
    with pytest.raises(InputError) as e:
        check(_Vars, {"other_role_var": object(), **bad})  # others' variables are not this model's business
    assert str(e.value).startswith(line) and "\n" not in str(e.value) and "s3cret" not in str(e.value), str(e.value)


def test_a_role_without_a_model_still_gives_defaults_and_validates():
    calls = []
    mod = types.SimpleNamespace(DEFAULTS={"y": 1}, validate=lambda v: calls.append(v["y"]))
    role = Role("legacy", mod)
    assert role.model is None and role.defaults == {"y": 1}
    role.validate({"y": 2})
    assert calls == [2]


def test_the_model_runs_before_the_hook():
    calls = []
    mod = types.SimpleNamespace(Vars=_Vars, validate=lambda v: calls.append(v))
    with pytest.raises(InputError, match="x_mode 'c'"):
        Role("r", mod).validate({"x_mode": "c"})
    assert calls == []


def _merged(**over):
    return {**merged_defaults([ROLES[r] for r in ORDER]), **over}


@pytest.mark.parametrize("value", [{"password": "nvapi-Leak3d-xyz", "nvcr.io": None},
                                   [{"username": "$oauthtoken", "password": "nvapi-Leak3d-xyz"}]])
def test_a_misshaped_registry_auths_never_shows_the_password_it_holds(value):
    """Mis-indented or written as a list, the credential sits where a mapping was wanted: the error names
    the variable and what is wanted, never the value."""
    with pytest.raises(InputError) as e:
        ROLES["docker"].validate(_merged(registry_auths=value))
    assert "nvapi-Leak3d-xyz" not in str(e.value) and "registry_auths" in str(e.value)


def test_a_brace_inside_a_urls_password_is_not_quoted():
    repo = {"url": "https://ops:pa{ss}word@mirror.example/{id}", "suite": "./", "key_url": "https://m/k"}
    with pytest.raises(InputError) as e:
        ROLES["docker"].validate(_merged(docker_repo=repo))
    assert "{ss}" not in str(e.value) and "a brace is not a placeholder" in str(e.value)


def test_a_key_with_a_trailing_newline_is_refused_by_the_type():
    with pytest.raises(InputError) as e:
        ROLES["triton"].validate(_merged(triton_models={"m\n": {"backend": "python"}}))
    assert str(e.value).startswith("triton_models") and "\n" not in str(e.value)  # one line


@pytest.mark.parametrize("role, name", [("sysctl", "sysctl"), ("trt_engines", "trt_engines"),
                                        ("dcgm_exporter", "dcgm_exporter_extra_counters")])
def test_a_null_mapping_or_list_is_empty(role, name):
    """A YAML key whose entries are all commented out loads as null: worked before the typed models."""
    ROLES[role].validate(_merged(**{name: None}))
