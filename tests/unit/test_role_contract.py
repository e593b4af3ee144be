"""The role contract (bringup.engine.roles.RoleModule): every hook declared once, misspelt hooks and roles missing
from ORDER refused in one line, one form of handlers, defaults derived from Vars, package roles."""
from __future__ import annotations

import types
from pathlib import Path

import pytest

from bringup.errors import InputError
from bringup.engine.roles import EVERY_FACT, HOOKS, Role, RoleModule, load_roles
from bringup.inventory.vars import RoleVars, want

ROLE = 'FACTS = ()\n\ndef resources(host):\n    return []\n'


def _project(tmp_path: Path, roles: dict[str, str | dict[str, str]], order: list[str] | None) -> Path:
    rdir = tmp_path / "roles"
    rdir.mkdir(parents=True)
    if order is not None:
        (rdir / "__init__.py").write_text(f"ORDER = {order!r}\n")
    for name, source in roles.items():
        if isinstance(source, dict):
            (rdir / name).mkdir()
            for file, text in source.items():
                (rdir / name / file).write_text(text)
        else:
            (rdir / f"{name}.py").write_text(source)
    return tmp_path


def test_the_contract_lists_every_hook_a_role_may_define():
    assert set(HOOKS) == {"FACTS", "Vars", "DEFAULTS", "HANDLERS", "WAITS_FOR_REBOOT", "resources", "fact_keys", "validate",
                          "audit", "checks", "verify", "rollback", "health"}
    assert all(RoleModule.__dict__[h].__doc__ for h in HOOKS if h[0].islower())


@pytest.mark.parametrize("name, closest", [("resurces", "resources"), ("HANDELRS", "HANDLERS"), ("Facts", "FACTS"),
                                           ("verfiy", "verify"), ("WAIT_FOR_REBOOT", "WAITS_FOR_REBOOT"),
                                           ("audits", "audit"), ("handlers", "HANDLERS")])
def test_a_misspelt_hook_is_one_line_naming_the_closest(tmp_path, name, closest):
    _project(tmp_path, {"r": ROLE + f"{name} = {{}}\n"}, ["r"])
    with pytest.raises(InputError) as e:
        load_roles(tmp_path)
    msg = str(e.value)
    assert msg.startswith(f"role r: {name} is not a role hook; did you mean {closest}?") and "\n" not in msg, msg


def test_helpers_and_imported_names_are_not_hooks(tmp_path):
    _project(tmp_path, {"r": "from bringup.inventory.vars import defaults_of, RoleVars\nfrom bringup.resources.sysctl import "
                             "validate_key\nSOURCES = {}\nPLAN_FILE = '/x'\n\ndef _check(x):\n    return x\n\n"
                             "def counters(host):\n    return []\n" + ROLE}, ["r"])
    assert list(load_roles(tmp_path)[1]) == ["r"]


def test_a_role_missing_from_order_is_refused_naming_it(tmp_path):
    _project(tmp_path, {"a": ROLE, "late": ROLE}, ["a"])
    with pytest.raises(InputError, match=r"roles/__init__.py: ORDER lacks role\(s\) late; add each where it runs"):
        load_roles(tmp_path)


def test_a_misspelt_order_entry_is_named_beside_the_role_it_misses(tmp_path):
    _project(tmp_path, {"docker": ROLE}, ["dokcer"])
    with pytest.raises(InputError, match=r"ORDER lacks role\(s\) docker \(ORDER names 'dokcer', which is no role: "
                                         r"did you mean docker\?\)"):
        load_roles(tmp_path)


def test_without_an_order_the_roles_run_by_name(tmp_path):
    _project(tmp_path, {"b": ROLE, "a": ROLE}, None)
    assert load_roles(tmp_path)[0] == ["a", "b"]


def test_a_role_without_resources_is_refused(tmp_path):
    _project(tmp_path, {"r": "FACTS = ()\n"}, ["r"])
    with pytest.raises(InputError, match=r"r.py: role r declares no resources\(host\)"):
        load_roles(tmp_path)


def test_facts_left_out_are_every_fact_said_so_and_a_string_is_refused():
    assert Role("r", types.SimpleNamespace(resources=lambda h: [])).facts is None
    assert Role("r", types.SimpleNamespace(FACTS=EVERY_FACT, resources=lambda h: [])).facts is None
    assert Role("r", types.SimpleNamespace(FACTS=["a.b"], resources=lambda h: [])).facts == ("a.b",)
    with pytest.raises(InputError, match=r"role r: FACTS 'nvidia.smi' must be a tuple of fact names"):
        Role("r", types.SimpleNamespace(FACTS="nvidia.smi", resources=lambda h: []))


def test_handlers_are_one_form_whether_a_mapping_or_a_function_of_the_host():
    plain = Role("a", types.SimpleNamespace(HANDLERS={"restart": ("systemctl restart x",)}))
    by_host = Role("b", types.SimpleNamespace(HANDLERS=lambda host: {"restart": [f"restart {host}"]}))
    assert plain.handlers("h") == {"restart": ["systemctl restart x"]}
    assert by_host.handlers("h") == {"restart": ["restart h"]}
    with pytest.raises(InputError, match="role c: HANDLERS must map handler names to commands"):
        Role("c", types.SimpleNamespace(HANDLERS=["restart"]))


def test_a_hook_that_is_not_a_function_is_refused():
    with pytest.raises(InputError, match="role r: verify must be a function"):
        Role("r", types.SimpleNamespace(verify="yes"))


class _Vars(RoleVars):
    x_port: int = want(80, "a port")


def test_defaults_are_derived_from_vars_and_a_defaults_that_disagrees_is_refused():
    assert Role("r", types.SimpleNamespace(Vars=_Vars)).defaults == {"x_port": 80}
    assert Role("r", types.SimpleNamespace(Vars=_Vars, DEFAULTS={"x_port": 80})).defaults == {"x_port": 80}
    with pytest.raises(InputError, match="role r: DEFAULTS says otherwise than Vars about x_port; leave DEFAULTS out"):
        Role("r", types.SimpleNamespace(Vars=_Vars, DEFAULTS={"x_port": 81})).defaults


def test_a_role_may_be_a_package_split_by_concern(tmp_path):
    _project(tmp_path, {"big": {"__init__.py": "from .files import config\nfrom . import checks as _checks\n"
                                               "FACTS = ()\nHANDLERS = {'reload': ['true']}\n\n"
                                               "def resources(host):\n    return config(host)\n\n"
                                               "def checks(host):\n    return _checks.lines(host)\n",
                                "files.py": "def config(host):\n    return ['file of ' + host]\n",
                                "checks.py": "from bringup.checks import line\n\n"
                                             "def lines(host):\n    return [line('software', 'big', 'PASS', host)]\n"},
                        "small": ROLE}, ["small", "big"])
    order, roles = load_roles(tmp_path)
    assert order == ["small", "big"]
    big = roles["big"]
    assert big.resources("h") == ["file of h"] and big.handlers("h") == {"reload": ["true"]}
    assert [c.seen for c in big.checks("h")] == ["h"]


def test_a_role_both_a_file_and_a_package_is_refused(tmp_path):
    _project(tmp_path, {"r": ROLE}, ["r"])
    (tmp_path / "roles" / "r").mkdir()
    (tmp_path / "roles" / "r" / "__init__.py").write_text(ROLE)
    with pytest.raises(InputError, match="role r is both r.py and a package r/; keep one"):
        load_roles(tmp_path)


def test_two_projects_with_a_package_role_of_one_name_each_get_their_own_modules(tmp_path):
    for n in ("one", "two"):
        _project(tmp_path / n, {"big": {"__init__.py": "from .files import WHO\nFACTS = ()\n\n"
                                                       "def resources(host):\n    return [WHO]\n",
                                        "files.py": f"WHO = {n!r}\n"}}, ["big"])
    assert load_roles(tmp_path / "one")[1]["big"].resources("h") == ["one"]
    assert load_roles(tmp_path / "two")[1]["big"].resources("h") == ["two"]
