"""A role's variables as a typed model, and the one-line errors of bad input.

A role declares its variables as a pydantic model, ``Vars``: one field per variable, its type, its
constraints and its default (the role's defaults are derived from it: one source; a ``DEFAULTS`` the
module still gives must say the same, :class:`bringup.engine.roles.Role`).  A variable
several roles read is declared once, in a model of the module that owns it, and each role includes it
by inheriting that model::

    class Vars(gpu.GpuVars, RoleVars):   # shared models first
        my_port: int = want(9400, "must be a TCP port number", ge=1, le=65535)
        my_repo: RepoSpec | None = None          # a mapping: its own Spec model, unknown keys refused

The engine validates every host's merged variables with each selected role's model before anything
connects (:func:`check`), then calls the role's ``validate(vars)`` hook, if any, for what a type cannot
say (a file on the control machine, a rendered config).  A :class:`pydantic.ValidationError` becomes the
one line bad input always is: the variable (and the key path inside a mapping), the value (a secret's
masked), what is wanted; an unknown key of a mapping is named with the closest known one.

Booleans are strict: the string ``"false"`` is true in Python, so a quoted ``irq_affinity_in_containers:
"false"`` would do what it says not to.  Only real booleans pass (YAML's own words ``true/false, yes/no,
on/off`` load as booleans; so does ``--set k=no``).  Every model is strict (no ``"5"`` for 5); a number
field takes no NaN or Infinity.

This module imports pydantic: role modules import it, and roles are loaded only by the tasks that
validate (``bringup --help`` imports none of it).
"""
from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Any, Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, SecretStr, ValidationError, model_validator
from pydantic.fields import FieldInfo

from ..errors import InputError

__all__ = ["RoleVars", "Spec", "want", "defaults_of", "check", "one_line", "Text", "AbsPath", "key_matching",
           "check_keys", "BOOL_WANTED"]

#: What a boolean variable must be, said the same way for every one.
BOOL_WANTED = "must be true or false (unquoted; YAML's yes/no, on/off too)"


def _null_is_empty(cls: type[BaseModel], data: Any) -> Any:
    """A mapping or list variable given as null is empty: a YAML key whose entries are all commented out
    loads as null, and the roles read ``vars.get(name) or {}``."""
    if not isinstance(data, Mapping):
        return data
    out = dict(data)
    for name, f in cls.model_fields.items():
        if name in out and out[name] is None and f.default_factory is not None:
            empty = f.get_default(call_default_factory=True)  # a fresh copy
            if empty in ({}, []):
                out[name] = empty
    return out


class RoleVars(BaseModel):
    """Base of a role's ``Vars`` (and of a shared variables' model): validated against all of a host's
    variables, so every other variable (another role's, ``ansible_*``) is ignored, not refused."""

    model_config = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False, defer_build=True)
    _nulls = model_validator(mode="before")(classmethod(_null_is_empty))


class Spec(BaseModel):
    """Base of a mapping variable's value (a repository, an entry of ``triton_models``): unknown keys
    are refused, naming the closest known one."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, defer_build=True)
    _nulls = model_validator(mode="before")(classmethod(_null_is_empty))


def want(default: Any, wanted: str, *, secret: bool = False, **constraints: Any) -> Any:
    """A field with ``default`` whose error says ``wanted`` (``"must be a TCP port number"``); pydantic's
    constraints (``ge``, ``le``, ``pattern``, ...) as keywords.  ``secret``: an error never shows the value
    (a password written as text).  ``...`` as the default: the key is required.  A mutable default is
    copied per use."""
    extra = {"secret": True} if secret else None
    if isinstance(default, (dict, list)):
        import copy

        return Field(default_factory=lambda: copy.deepcopy(default), description=wanted, json_schema_extra=extra,
                     **constraints)
    return Field(default, description=wanted, json_schema_extra=extra, **constraints)


def _text(v: Any) -> Any:
    if isinstance(v, (str, SecretStr)):
        return v
    if isinstance(v, dict) and len(v) == 1 and next(iter(v)) in ("env", "file"):
        # Untagged, {env: NAME} is a reference only in a password-like variable; here it is a mapping.
        kind = next(iter(v))
        raise ValueError(f"must be text; a secret reference is written {{bringup_secret: {{{kind}: "
                         f"{'NAME' if kind == 'env' else 'PATH'}}}}}")
    raise ValueError("must be text")


def _abs_path(v: Any) -> str:
    if not isinstance(v, str) or not v.startswith("/") or any(c in v for c in "\n\0"):
        raise ValueError("must be an absolute path")
    if ".." in v.split("/"):
        raise ValueError("must be an absolute path without '..': set the folder it means, written plainly")
    return v


#: Text, or a secret reference resolved by the inventory (``{bringup_secret: {env: NAME}}``: a :class:`SecretStr`).
Text = typing.Annotated[Any, PlainValidator(_text)]
#: An absolute path on the host: no newline, no ``..`` (``/data/../etc`` is not the folder it seems).
AbsPath = typing.Annotated[str, PlainValidator(_abs_path)]


def key_matching(pattern: str, wanted: str) -> Any:
    """A mapping variable's key type: text matching ``pattern``; else the line says ``'key' <wanted>``."""
    rx = re.compile(pattern)

    def _key(v: Any) -> str:
        if not isinstance(v, str) or not rx.fullmatch(v):  # fullmatch: "$" alone lets "m\n" through
            raise ValueError(wanted)
        return v

    return typing.Annotated[str, PlainValidator(_key)]


def defaults_of(model: type[BaseModel]) -> dict[str, Any]:
    """``{variable: default}`` of a role's model: its ``DEFAULTS``."""
    return {name: f.get_default(call_default_factory=True) for name, f in model.model_fields.items()}


def check(model: type[BaseModel], vars: Mapping[str, Any]) -> None:
    """Validate ``vars`` against ``model``; the first problem is one :class:`InputError` line."""
    try:
        model.model_validate(dict(vars))
    except ValidationError as e:
        raise one_line(e, model) from None


# --------------------------------------------------------------------------------------------------
# ValidationError -> one line


def one_line(e: ValidationError, model: type[BaseModel]) -> InputError:
    """The first error of ``e`` as bad input is worded: ``name.path value: what is wanted``."""
    errors = e.errors(include_url=False)
    # A misspelt key first: its "required" twin (the key spelt right is missing) follows from it.
    err = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
    loc = [p for p in err["loc"] if p != "[key]"]
    if err["type"] == "extra_forbidden":
        _, at, where, _ = _walk(model, loc[:-1])
        key = loc[-1]
        known = list(at.model_fields) if _is_model(at) else []
        return InputError(f"{_path(where)}: unknown key {key!r}{_hint(str(key), known)}")
    if err["loc"] and err["loc"][-1] == "[key]":
        said, loc = _said(err), _walk(model, loc)[2]
        return InputError(f"{_path(loc)}: {_shown(loc[-1])} {said}" if said else
                          f"{_path(loc)}: key {_shown(loc[-1])}: {_auto(err, None)}")
    field, at, loc, secret = _walk(model, loc)
    said = _said(err)
    if not loc:  # a rule across variables (a model validator of the role's Vars)
        return InputError(said or _auto(err, None))
    wanted = said or (field.description if field is not None and field.description else None) or _auto(err, field)
    if err["type"] == "missing":
        return InputError(f"{_path(loc)}: is required; {wanted}" if field is not None and field.description
                          else f"{_path(loc)}: is required")
    if said and _is_model(at):  # a rule of the whole mapping (a model validator): the value is the mapping
        return InputError(f"{_path(loc)}: {said}")
    return InputError(f"{_path(loc)} {_shown(SecretStr('x') if secret else err.get('input'))}: {wanted}")


def _said(err: dict) -> str | None:
    """The message a validator of the model raised (ValueError), as it said it."""
    if err["type"] in ("value_error", "assertion_error"):
        return str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return None


def _auto(err: dict, field: FieldInfo | None) -> str:
    """What is wanted, from pydantic's error kind, when the field says nothing itself."""
    kind, ctx = err["type"], err.get("ctx") or {}
    lo, hi = _bounds(field)
    if kind == "bool_type":
        return BOOL_WANTED
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        if lo is not None and hi is not None:
            return f"must be within {lo}-{hi}"
        return {"greater_than_equal": "must be >= {ge}", "less_than_equal": "must be <= {le}",
                "greater_than": "must be above {gt}", "less_than": "must be below {lt}"}[kind].format(**ctx)
    if kind == "literal_error":
        return f"must be {str(ctx.get('expected', '')).replace(chr(39), '')}"
    if kind in ("int_type", "int_from_float"):
        return "must be a whole number"
    if kind in ("float_type", "finite_number"):
        return "must be a finite number"
    return {"string_type": "must be text", "dict_type": "must be a mapping", "list_type": "must be a list",
            "model_type": "must be a mapping", "model_attributes_type": "must be a mapping",
            "string_pattern_mismatch": "is malformed", "too_short": "must not be empty"}.get(kind, err["msg"])


def _bounds(field: FieldInfo | None) -> tuple[Any, Any]:
    lo = hi = None
    for m in field.metadata if field is not None else ():
        lo = getattr(m, "ge", None) if getattr(m, "ge", None) is not None else lo
        hi = getattr(m, "le", None) if getattr(m, "le", None) is not None else hi
    return lo, hi


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _unwrap(tp: Any) -> Any:
    """``X`` of ``X | None`` and of ``Annotated[X, ...]``."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _walk(model: type[BaseModel], loc: list) -> tuple[FieldInfo | None, Any, list, bool]:
    """The field ``loc`` ends on (or the variable's, inside its mapping or list), the type there,
    ``loc`` without pydantic's tags of a union's members, and whether any field on the way is marked
    secret (a mis-shaped ``registry_auths`` entry may hold a password where a mapping was wanted: its
    value is not shown either)."""
    field: FieldInfo | None = None
    tp: Any = model
    clean: list = []
    secret = False
    for part in loc:
        tp = _unwrap(tp)
        origin = typing.get_origin(tp)
        if _is_model(tp) and part in tp.model_fields:
            field = tp.model_fields[part]
            secret = secret or bool((field.json_schema_extra or {}).get("secret"))
            tp = field.annotation
        elif origin in (dict, Mapping) or (origin is not None and _is_subclass(origin, Mapping)):
            tp = typing.get_args(tp)[1]  # an entry's error says what its variable wants, unless it has a field
        elif origin in (list, tuple):
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            tp = Any  # ``part`` names which member of the union failed: not a key
            continue
        else:
            tp = Any
        clean.append(part)
    return field, _unwrap(tp), clean, secret


def _is_subclass(tp: Any, base: type) -> bool:
    try:
        return isinstance(tp, type) and issubclass(tp, base)
    except TypeError:
        return False


def _path(loc: Iterable) -> str:
    out = ""
    for p in loc:
        if isinstance(p, str) and not (p.isprintable() and p.strip() == p):
            p = repr(p)  # a key with a newline or edge spaces: shown, never breaking the one line
        out += f"[{p}]" if isinstance(p, int) and out else (f".{p}" if out else str(p))
    return out


def _shown(value: Any) -> str:
    """``repr`` of a bad value, with every secret in it masked (a resolved reference, a URL's password)."""
    from ..secrets import MASK

    if isinstance(value, Mapping):  # its shape, not its values: they may be credentials in the wrong place
        return f"(a mapping of {', '.join(repr(str(k)) for k in list(value)[:5])}{', ...' if len(value) > 5 else ''})"
    if isinstance(value, (list, tuple)) and not all(isinstance(x, (str, int, float, bool, type(None)))
                                                     for x in value):
        return f"(a list of {len(value)})"
    text = repr(MASK.mask_obj(value))
    return text if len(text) <= 200 else text[:197] + "..."


def _hint(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(sorted(known))}"


# --------------------------------------------------------------------------------------------------
# For a role's ``validate`` hook (what a type cannot say): a mapping whose keys are known only then


def check_keys(value: Mapping, known: Iterable[str], where: str) -> None:
    """No key of ``value`` outside ``known``; an unknown one is named with the closest known key."""
    known = list(known)
    for key in value:
        if key not in known:
            raise InputError(f"{where}: unknown key {key!r}{_hint(str(key), known)}")
