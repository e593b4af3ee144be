"""The Ansible connection variables bringup honours (:class:`ConnectionVars`), validated, and Ansible's other
names for them (:data:`ALIASES`: ``ansible_ssh_user``, ``ansible_ssh_pass``, ...), taken as ansible-core takes them.
:mod:`bringup.inventory.hosts` merges a host's variables and hands them here."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ..errors import shown
from .addresses import address_problem

__all__ = ["ConnectionVars", "become_problem", "ALIASES", "SECRET_VARS", "FIXES", "SECRETS", "ALIAS_NAMES", "take_aliases"]


class ConnectionVars(BaseModel):
    """The Ansible connection variables bringup honours, validated."""

    model_config = ConfigDict(extra="ignore")

    ansible_host: str | None = None
    ansible_port: int = Field(22, ge=1, le=65535)
    ansible_user: str | None = None
    ansible_ssh_private_key_file: str | None = None
    #: Text, ``{env: NAME}`` or ``{file: PATH}`` (see :mod:`bringup.secrets`); never shown.
    ansible_password: SecretStr | None = None
    ansible_connection: Literal["ssh", "local", "paramiko", "smart"] = "ssh"
    ansible_become: bool = False
    #: A user name as sudo -u takes it (useradd's letters, digits, '_', '.', '-', a trailing '$'), or ``#UID``.
    ansible_become_user: str = Field("root", pattern=r"^(#\d{1,10}|[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?)$")
    ansible_become_password: SecretStr | None = None
    #: How Ansible becomes the user, and sudo's program and flags: bringup speaks sudo's prompt handshake only
    #: (:func:`become_problem` refuses any other, when ``ansible_become`` is on).
    ansible_become_method: str = "sudo"
    ansible_become_exe: str = "sudo"
    ansible_become_flags: str | None = None
    ssh_known_hosts: str = "~/.ssh/known_hosts"
    ssh_connect_timeout: float = Field(10, gt=0, le=3600, allow_inf_nan=False)
    #: Seconds between SSH keepalives on an idle session (0: none).
    ssh_keepalive_interval: int = Field(15, ge=0)
    #: Longest one round trip may take before the host counts as unreachable.
    command_timeout: float = Field(1800, gt=0, le=7 * 86400, allow_inf_nan=False)
    #: Longest a run that writes waits for the host's run lock (another run, or an earlier run's scripts).
    run_lock_timeout: float = Field(60, gt=0, le=3600, allow_inf_nan=False)

    @field_validator("ansible_become_password", "ansible_password", mode="before")
    @classmethod
    def _one_line(cls, v: Any) -> Any:
        # Only text (or a resolved reference): pydantic's own error would name the value's type and more.
        text = v.get_secret_value() if isinstance(v, SecretStr) else v
        if v is not None and (not isinstance(text, str) or "\n" in text or "\r" in text):
            raise ValueError("must be one line of text")
        return v

    @field_validator("ansible_user", mode="before")
    @classmethod
    def _user_text(cls, v: Any) -> Any:
        # YAML's `ansible_user: 1000` is the user "1000" to Ansible (its remote_user is a string option).
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("ansible_host")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        if v is not None and address_problem(v):
            raise ValueError(address_problem(v))
        return v

    @field_validator("ansible_port", mode="before")
    @classmethod
    def _port_is_int(cls, v: Any) -> Any:
        # YAML gives "2222" for a quoted port; accept digits, refuse the rest.
        if isinstance(v, bool):
            raise ValueError("must be an integer")
        if isinstance(v, str) and v.strip().isdigit():
            return int(v)
        return v


FIXES = {
    "ansible_host": "a host name or IP address as it is (the port in ansible_port, the user in ansible_user)",
    "ansible_port": "an integer 1-65535",
    "ansible_user": "a user name as text",
    "ansible_connection": "one of ssh, local",
    "ansible_become": "true or false",
    "ansible_become_user": "a user name like root or triton (letters, digits, '_', '.', '-'), or #UID",
    "ssh_connect_timeout": "a number of seconds > 0, at most 3600",
    "ssh_keepalive_interval": "a whole number of seconds >= 0 (0: no keepalives)",
    "command_timeout": "a number of seconds > 0, at most 604800 (a week)",
    "run_lock_timeout": "a number of seconds > 0, at most 3600",
    "ansible_password": "one line of text, {env: NAME} or {file: PATH}",
    "ansible_become_password": "one line of text, {env: NAME} or {file: PATH}",
    "ansible_become_method": "sudo (the only method bringup speaks)",
    "ansible_become_exe": "sudo",
    "ansible_become_flags": "sudo's flags as text, such as '-H -S -n'",
}

#: Ansible's other names of a connection variable, lowest precedence first (its connection and become plugins'
#: ``vars:`` lists; the last one set wins: ``ansible_ssh_host`` over ``ansible_host``, as ``ansible -vvv`` shows).
ALIASES = {
    "ansible_host": ("ansible_host", "ansible_ssh_host"),
    "ansible_port": ("ansible_port", "ansible_ssh_port"),
    "ansible_user": ("ansible_user", "ansible_ssh_user"),
    "ansible_password": ("ansible_password", "ansible_ssh_pass", "ansible_ssh_password"),
    "ansible_become_user": ("ansible_become_user", "ansible_sudo_user"),
    "ansible_become_password": ("ansible_become_password", "ansible_become_pass", "ansible_sudo_pass"),
    "ansible_become_exe": ("ansible_become_exe", "ansible_sudo_exe"),
    "ansible_become_flags": ("ansible_become_flags", "ansible_sudo_flags"),
    "ansible_ssh_private_key_file": ("ansible_private_key_file", "ansible_ssh_private_key_file"),
}

SECRETS = frozenset({"ansible_password", "ansible_become_password"})
#: Never printed, not even in an error about themselves (under any of Ansible's names).
SECRET_VARS = frozenset(name for var in SECRETS for name in ALIASES[var])
ALIAS_NAMES = frozenset(name for names in ALIASES.values() for name in names)


def take_aliases(merged: dict[str, Any]) -> dict[str, str]:
    """Each connection variable set under another of Ansible's names (``ansible_ssh_pass``, ``ansible_ssh_user``,
    ...) takes that value, as Ansible logs in with it: the last name of :data:`ALIASES` that is set (not null) wins.
    Returns the names taken, ``{variable: the name the inventory wrote}``, for the messages about them (the host's
    ``raw`` and ``sources`` keep each name as written)."""
    taken: dict[str, str] = {}
    for var, names in ALIASES.items():
        name = next((n for n in reversed(names) if merged.get(n) is not None), None)
        if name is not None and name != var:
            merged[var] = merged[name]
            taken[var] = name
    return taken


#: sudo's flags that change nothing of what bringup runs: it passes ``-H`` itself and ``-S`` (with a password) or
#: ``-n`` (without one); Ansible's default ``ansible_become_flags`` is ``-H -S -n``.  Short ones may come bundled in
#: any order (``-SH``, ``-nHS``), as sudo takes them.
_SUDO_LONG_FLAGS_OF_BRINGUP = frozenset({"--set-home", "--stdin", "--non-interactive"})
_SUDO_SHORT_FLAGS_OF_BRINGUP = frozenset("HSn")
#: The sudo bringup runs (the host's PATH finds the distribution's own): ``ansible_become_exe`` naming it.
_SUDO_EXES = frozenset({"sudo", "/usr/bin/sudo", "/bin/sudo"})
#: Ansible's names of its sudo become plugin.
_SUDO_METHODS = frozenset({"sudo", "ansible.builtin.sudo"})


def _bringups_flag(flag: str) -> bool:
    if flag.startswith("--"):
        return flag in _SUDO_LONG_FLAGS_OF_BRINGUP
    return len(flag) > 1 and flag[0] == "-" and set(flag[1:]) <= _SUDO_SHORT_FLAGS_OF_BRINGUP


def become_problem(c: ConnectionVars, merged: dict[str, Any], taken: dict[str, str] | None = None) -> str | None:
    """Why the host's become is not one bringup does, or None: bringup becomes the user as
    ``sudo -S -p PROMPT -H -u USER`` (``sudo -n -H -u USER`` without a password) and nothing else, so an
    ``ansible_become_method`` other than sudo (su, doas, pbrun, ...), another ``ansible_become_exe`` or flags of
    their own are refused, naming the variable, rather than silently become through sudo (which would hand su's
    root password to sudo's prompt).  Checked only with ``ansible_become`` on, as Ansible reads them only then.
    ``merged``: the host's variables as given (a vaulted value, which the model makes plain text, is not shown);
    ``taken``: the variables set under another of Ansible's names (``ansible_sudo_exe``), named as written."""
    if not c.ansible_become:
        return None
    how = ("bringup becomes the user with sudo only (`sudo -S -p PROMPT -H -u USER`, its prompt answered with "
           "ansible_become_password, or `sudo -n -H -u USER`)")

    def got(var: str) -> str:
        value = merged.get(var)
        return "its value is not shown" if type(value) is not str else f"got {shown(value, 60)!r}"

    if c.ansible_become_method not in _SUDO_METHODS:
        return (f"ansible_become_method must be sudo ({got('ansible_become_method')}): {how}; let the login user "
                "sudo there, or set ansible_become: false and log in as the user needed (ansible_user)")
    name = (taken or {}).get("ansible_become_exe", "ansible_become_exe")
    if c.ansible_become_exe not in _SUDO_EXES:
        return (f"{name} must be sudo ({got('ansible_become_exe')}): {how}, found on the host's PATH; remove it for "
                f"bringup's hosts (--set {name}=sudo)")
    name = (taken or {}).get("ansible_become_flags", "ansible_become_flags")
    if not all(_bringups_flag(f) for f in (c.ansible_become_flags or "").split()):
        return (f"{name} may hold only -H, -S and -n ({got('ansible_become_flags')}): {how}, passing no other flag; "
                f"remove it for bringup's hosts (--set {name}='-H -S -n')")
    return None
