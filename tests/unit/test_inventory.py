"""Inventory: Ansible layout, precedence, and one-line errors."""
from pathlib import Path

import pytest

from bringup.errors import InputError, InventoryError
from bringup.inventory.hosts import load_inventory, parse_set

REPO = Path(__file__).resolve().parents[2]

LAYERED = """
all:
  vars: {level: all, a: all, ansible_user: ops}
  children:
    dc:
      vars: {level: dc, b: dc}
      children:
        rack1:
          vars: {level: rack1}
          hosts:
            h1: {level: host, ansible_port: "2222"}
            h2:
    other:
      hosts:
        h2: {c: other}
"""


def write(tmp_path, text, name="hosts"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_precedence_all_parent_child_host_set(tmp_path):
    inv = load_inventory(write(tmp_path, LAYERED), overrides={"a": "cli"})
    h1, h2 = inv.host("h1"), inv.host("h2")
    assert h1.vars["level"] == "host"
    assert h2.vars["level"] == "rack1"  # child group beats parent beats all
    assert h2.vars["b"] == "dc" and h2.vars["c"] == "other"
    assert h1.vars["a"] == "cli"  # --set beats everything
    assert h1.connection.ansible_port == 2222 and h1.connection.ansible_user == "ops"
    assert set(inv.groups["dc"]) == {"h1", "h2"}  # membership flows up to ancestors
    assert h1.groups[0] == "all" and h1.groups[-1] == "rack1"


def test_role_defaults_are_lowest():
    from bringup.inventory.hosts import ConnectionVars, Host
    from bringup.engine.roles import Role
    from bringup.engine.runner import prepare
    import types
    mod = types.SimpleNamespace(DEFAULTS={"x": 1, "y": 1})
    h = Host("h", ["all"], {"y": 2}, ConnectionVars())
    assert prepare([h], [Role("r", mod)]) == {"h": {"x": 1, "y": 2}}


def test_shipped_inventory_has_the_guide_cluster():
    inv = load_inventory(REPO / "hosts")
    assert inv.host("trt-l40s-01").vars["gpu_profile"] == "l40s"
    assert inv.host("trt-a10-01").vars["gpu_profile"] == "a10"
    assert "l40s" in inv.groups and "a10" in inv.groups and "cpu" in inv.groups


def test_yaml_error_names_file_line_column(tmp_path):
    p = write(tmp_path, "all:\n  hosts:\n    h1: {a: 1\n    h2: {}\n")
    with pytest.raises(InventoryError) as e:
        load_inventory(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:") and "YAML error" in msg
    line, col = msg.split(":")[1:3]
    assert line.isdigit() and col.isdigit() and int(line) >= 3


def test_duplicate_key_is_refused(tmp_path):
    p = write(tmp_path, "all:\n  hosts:\n    h1: {}\n    h1: {}\n")
    with pytest.raises(InventoryError, match=r":4:5: duplicate key 'h1'"):
        load_inventory(p)


def test_unknown_host_suggests_closest():
    inv = load_inventory(REPO / "hosts")
    with pytest.raises(InventoryError, match="did you mean trt-l40s-01"):
        inv.host("trt-l40-01")


@pytest.mark.parametrize("port", [0, 70000, "ssh", True])
def test_bad_port_names_host_and_variable(tmp_path, port):
    p = write(tmp_path, f"all:\n  hosts:\n    h1: {{ansible_port: {port!r}}}\n".replace("'", ""))
    with pytest.raises(InventoryError, match=r"host 'h1': ansible_port must be an integer 1-65535"):
        load_inventory(p)


def test_bad_connection_type(tmp_path):
    p = write(tmp_path, "all:\n  hosts:\n    h1: {ansible_connection: winrm}\n")
    with pytest.raises(InventoryError, match="ansible_connection must be one of ssh, local"):
        load_inventory(p)


def test_missing_file(tmp_path):
    with pytest.raises(InventoryError, match="no such inventory file"):
        load_inventory(tmp_path / "nope")


def test_select_union_and_errors():
    inv = load_inventory(REPO / "hosts")
    assert [h.name for h in inv.select(hosts="trt-a10-01,trt-l40s-01", group="l40s")] == ["trt-a10-01", "trt-l40s-01"]
    with pytest.raises(InventoryError, match="unknown group 'l40'; did you mean l40s"):
        inv.select(group="l40")
    with pytest.raises(InputError, match="no host selected"):
        inv.select()


def test_parse_set_reads_yaml_values():
    assert parse_set(["a=8", "b=true", "c={x: null}", "d=word"]) == {"a": 8, "b": True, "c": {"x": None}, "d": "word"}
    with pytest.raises(InputError, match="expected KEY=VALUE"):
        parse_set(["novalue"])
