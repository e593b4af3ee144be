"""Reading a YAML (or JSON) file an operator names: bounded in size and in expanded aliases, strict UTF-8,
duplicate keys refused, every error one line naming the file, line and column."""
from __future__ import annotations

import io
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from ...errors import InventoryError, shell_word
from ...secrets import credential_name, credential_value
from ...userfile import read_capped
from ..vault import Vault, VaultError, is_vaulted
from .model import VAR_NAME_KIND, SourceError

__all__ = ["MAX_BYTES", "MAX_NODES", "MAX_DEPTH", "too_deep", "KeyLines", "YamlSyntaxError", "load_yaml", "load_yaml_lines", "read_text",
           "read_plain", "sealed_error", "private_mode", "secret_line"]


class YamlSyntaxError(InventoryError):
    """The text is not YAML at all (it may be another format: an INI inventory)."""


def _error(message: str, kind: str, cls: type = InventoryError) -> InventoryError:
    """``cls(message)`` with its ``kind``: what is wrong, quoting nothing of the file (:func:`sealed_error`)."""
    e = cls(message)
    e.kind = kind
    return e


#: Bounds on what an inventory may be: a bigger or deeper one is a mistake (``/dev/zero``, an alias bomb).
MAX_BYTES = 16 * 1024 * 1024
MAX_NODES = 1_000_000  # YAML nodes once every alias is expanded
#: Mappings and lists within each other, the document's own levels included (a group is two: its name and
#: its ``children:``, so :data:`~.yamlinv.MAX_GROUP_DEPTH` groups fit): real variables nest a few levels; a
#: deeper document is a mistake or an attack on the recursive code that walks values (templates, secrets, vault).
MAX_DEPTH = 200


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate and unhashable keys (a silent override is a trap) and documents
    that would expand past :data:`MAX_NODES` nodes; YAML 1.1 merge keys (``<<: *base``) work."""

    def construct_document(self, node):
        _expanded_size(node)
        return super().construct_document(node)

    def construct_object(self, node, deep=False):
        # A value its tag's constructor cannot read (``!!float abc``, ``!!bool maybe``, a date such as 2020-13-45,
        # tagged or not) raised ValueError, KeyError or AttributeError out of PyYAML: a traceback quoting the value.
        try:
            return super().construct_object(node, deep)
        except SourceError:  # (a ValueError: bringup's own line, kept)
            raise
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError):
            tag = str(node.tag).replace("tag:yaml.org,2002:", "!!")
            raise _error(f"{_where(node.start_mark)}: a value that is no {tag} (a {tag} tag, or a date such as "
                         "2020-13-45, on something that is not one); quote it if it is text, or fix it",
                         f"a value that is no {tag}") from None


def _where(mark) -> str:
    return f"{mark.name}:{mark.line + 1}:{mark.column + 1}"


def _expanded_size(root: yaml.Node) -> int:
    """Nodes of the document with every alias expanded (shared nodes count each time they are used); a
    document nested more than :data:`MAX_DEPTH` levels is refused here, before anything recurses into it."""
    sizes: dict[int, int] = {}
    busy: set[int] = set()

    def size(node: yaml.Node, depth: int = 0) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in busy:
            raise _error(f"{_where(node.start_mark)}: an alias refers to the node that contains it; "
                         "a recursive structure is not an inventory", "an alias within the node it refers to")
        if depth > MAX_DEPTH:
            raise _error(f"{_where(node.start_mark)}: nested too deeply (more than {MAX_DEPTH} levels of "
                         "mappings and lists within each other); flatten it", f"nested more than {MAX_DEPTH} levels")
        busy.add(id(node))
        if isinstance(node, yaml.MappingNode):
            n = 1 + sum(size(k, depth + 1) + size(v, depth + 1) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            n = 1 + sum(size(v, depth + 1) for v in node.value)
        else:
            n = 1
        busy.discard(id(node))
        if n > MAX_NODES:
            raise _error(
                f"{_where(node.start_mark)}: this value expands to more than {MAX_NODES:,} YAML nodes "
                "(aliases within aliases); write it out or use fewer nested aliases",
                f"a value that expands to more than {MAX_NODES:,} YAML nodes")
        sizes[id(node)] = n
        return n

    return size(root)


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False):
    seen: set = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *base`: its keys are defaults that the mapping's own keys override (YAML 1.1)
        if key_node.tag == "!vault":
            # A decrypted key is a secret that every listing shows as a name (`hosts --host`, a key of 2 letters
            # passing the masker); ansible-inventory fails on it.  Refused, never decrypted.
            raise _error(f"{_where(key_node.start_mark)}: a key encrypted with !vault; encrypt the value and keep "
                         "its key a plain name (ansible-inventory cannot list such a key either)",
                         "a key encrypted with !vault")
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise _error(
                f"{_where(key_node.start_mark)}: a {type(key).__name__} cannot be a key; use a name "
                "(a `? [a, b]` or `? {...}` key is not one)", f"a key that is a {type(key).__name__}") from None
        if key in seen:
            raise _error(f"{_where(key_node.start_mark)}: duplicate key {key!r}; keep one of them", "a duplicate key")
        seen.add(key)
    result = yaml.SafeLoader.construct_mapping(loader, node, deep=deep)
    lines = getattr(loader, "key_lines", None)
    if lines is not None:  # the mapping is kept with its lines, so its id is never reused meanwhile
        lines[id(result)] = (result, {loader.construct_object(k): k.start_mark.line + 1 for k, _ in node.value
                                      if k.tag != "tag:yaml.org,2002:merge"})
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _construct_vault(loader: _Loader, node: yaml.Node):
    """``!vault |`` and its envelope: the decrypted text (an error names the file and line, never a secret)."""
    if not isinstance(node, yaml.ScalarNode):
        raise _error(f"{_where(node.start_mark)}: !vault must be followed by the text ansible-vault "
                     "encrypt_string printed (`!vault |` and its lines)", "a !vault tag on a list or mapping")
    vault = getattr(loader, "vault", None) or Vault()
    return vault.decrypt(loader.construct_scalar(node), _where(node.start_mark).rsplit(":", 1)[0])


_Loader.add_constructor("!vault", _construct_vault)


def _construct_int(loader: _Loader, node: yaml.Node):
    """A YAML integer; one of more digits than Python converts (4,300) is one line, not a ValueError."""
    try:
        value = yaml.SafeLoader.construct_yaml_int(loader, node)
        if value.bit_length() <= _MAX_INT_BITS:
            return value
    except ValueError:
        if len(str(node.value)) <= 4300:  # (a short text that is no number: `!!int abc`)
            raise _error(f"{_where(node.start_mark)}: !!int on a value that is not a whole number; "
                         "remove the !!int tag or write a number", "!!int on a value that is not a whole number") from None
    # (a hexadecimal or binary one converts, but could never be printed: str() refuses it)
    raise _error(f"{_where(node.start_mark)}: a number of {len(str(node.value)):,} characters, more than "
                 "a number may have; quote it if it is text", "a number longer than a number may be") from None


#: The largest integer Python turns into decimal text (4,300 digits; ``sys.get_int_max_str_digits``).
_MAX_INT_BITS = 14_000


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` (loaded JSON or YAML) nests mappings and lists more than ``limit`` levels deep
    (walked without recursion)."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict):
            items = list(v.keys()) + list(v.values())
        elif isinstance(v, list):
            items = v
        else:
            continue
        if depth >= limit and items:
            return True
        stack.extend((x, depth + 1) for x in items if isinstance(x, (dict, list)))
    return False


def read_text(path: Path, inside: Path | None = None) -> str:
    """The file's text: at most :data:`MAX_BYTES` bytes, strict UTF-8 (an error names the line).  ``inside``: the
    folder the file must stay in (a vars file's ``group_vars/``), judged on the file opened (a link swapped in
    after the look that checked it is refused too, naming the file, never read)."""
    # Anything but a regular file is refused before it is opened: a pipe's or a terminal's read may never end.
    data = read_capped(path, MAX_BYTES, InventoryError,
                       not_regular=f"{path}: not a regular file (a folder, a pipe, a socket or a device); "
                                   "pass --inventory PATH of the inventory file or folder",
                       missing=f"{path}: no such inventory file (pass --inventory PATH)",
                       unreadable=f"{path}: cannot read inventory: ",
                       too_large=f"{path}: larger than {MAX_BYTES // 2**20} MiB; is it the inventory? "
                                 "(pass --inventory PATH of the inventory file or folder)",
                       inside=inside, out_of_folder=f"{path}: leads out of {inside} now (a symbolic link swapped in "
                                                    "since it was looked at); vars files must stay in their folder")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise InventoryError(f"{path}:{line}:{column}: byte 0x{data[e.start]:02x} (offset {e.start}) is not "
                             "UTF-8; save the file as UTF-8") from None


class KeyLines:
    """The line of each key of each mapping of a loaded document (1-based); ``sealed``: the document is a file that
    ansible-vault encrypted whole, whose errors found after loading are told by :func:`sealed_error` too."""

    def __init__(self, table: dict[int, tuple[dict, dict]] | None = None, sealed: bool = False):
        self._table = table or {}
        self.sealed = sealed

    def of(self, mapping: Any) -> dict:
        """``{key: line}`` of ``mapping`` (a dict of the document), empty for anything else."""
        entry = self._table.get(id(mapping))
        return entry[1] if entry is not None and entry[0] is mapping else {}


def read_plain(path: Path, vault: Vault | None = None, inside: Path | None = None) -> tuple[str, bool]:
    """:func:`read_text`, decrypted when ansible-vault encrypted the whole file; and whether it did."""
    text = read_text(path, inside)
    if not is_vaulted(text):
        return text, False
    return (vault or Vault()).decrypt(text, str(path)), True


def load_yaml(path: Path, text: str | None = None, vault: Vault | None = None) -> Any:
    """Parse a YAML file (or its ``text``, already read); a syntax error names file, line and column.
    ``vault`` opens ``!vault`` values and a file encrypted whole (without it, they are one line)."""
    return load_yaml_lines(path, text, vault)[0]


#: What a YAML error of each kind is, in words that quote nothing of the file (an undefined alias's name, a tag).
_YAML_KINDS = {"ComposerError": "a YAML alias or anchor error (an undefined alias?)",
               "ConstructorError": "a YAML tag or value that cannot be read (an unknown !tag?)",
               "ScannerError": "a YAML syntax error", "ParserError": "a YAML syntax error"}


def sealed_error(e: Exception, path: Path | str, why: str | None = None) -> InventoryError:
    """The error ``e``, met in the decrypted text of ``path`` (a file ansible-vault encrypted whole), told by the
    file, the line and what is wrong (its ``kind``) alone: its own message quotes that text, which is a secret
    (a line ``password: x`` of an INI [vars] section, an alias's name, a group's).  ``why``: the reason the text
    is not shown, when it is another (:func:`private_mode`)."""
    p, message = str(path), str(e)
    m = re.match(re.escape(p) + r":(\d+)(:\d+)?", message)
    at = f"{p}:{m.group(1)}{(m.group(2) or '') if why else ''}" if m else p
    if isinstance(e, VaultError):
        what = "a !vault value in it cannot be opened (no or a wrong password, or damaged)"
    else:
        what = getattr(e, "kind", None) or "not an inventory bringup can read"
    # The hints' commands name the file quoted (a file named `hosts;id` pasted into a shell must run nothing).
    if why and m:  # a private file: the operator may look at the line, bringup does not print it
        why += f" (`sed -n {m.group(1)}p -- {shell_word(p)}` shows that line)"
    return InventoryError(f"{at}: {what}; " + (why or "the file is encrypted with ansible-vault, so its text is not "
                                                     f"shown (`ansible-vault view -- {shell_word(p)}` shows it)"))


def private_mode(path: Path | str) -> str | None:
    """Why the text of ``path`` is not to be quoted back when it is no inventory, or None: a file that other users
    may not read (``/etc/shadow``, 0640; an ssh key, ``~/.netrc`` or a cloud credentials file, 0600) holds secrets
    by its owner's say, so a refusal names its line and what is wrong only (:func:`sealed_error`), as for a file
    ansible-vault encrypted whole: ``-i /etc/shadow`` printed a password hash in "group name '...' holds '/'"."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if mode & stat.S_IROTH:
        return None
    return (f"the file may not be read by other users (mode {stat.S_IMODE(mode):04o}: it may hold secrets), so its "
            "text is not shown")


def secret_line(e: Exception, path: Path | str, text: str) -> str | None:
    """Why the line that error ``e`` names (``path:N...``) is not to be quoted back, or None: it names a password,
    a token or a secret (``expected key=value in [client:vars], got 'password hunter2'`` printed the password of
    a ~/.my.cnf given as the inventory), told by its line and what is wrong only (:func:`sealed_error`)."""
    m = re.match(re.escape(str(path)) + r":(\d+)", str(e))
    lines = text.splitlines()
    if not m or not 0 < int(m.group(1)) <= len(lines) or not credential_value(lines[int(m.group(1)) - 1]):
        return None
    said, line = str(e)[m.end():], lines[int(m.group(1)) - 1]
    # Only where the message quotes the line beyond its secret's name (a !vault value's error quotes nothing): a word
    # of it, or a quoted part of the message that is in it (';x' of 'ansible_ssh_pass=abc ;x').
    words = [w for w in re.findall(r"[^\s=:'\"]{3,}", line) if not credential_name(w)]
    quoted = [a or b for a, b in re.findall(r"'([^'\n]+)'|\"([^\"\n]+)\"", said)]
    if not any(w in said for w in words) and not any(q in line and re.search(r"\w", q) and not credential_name(q) for q in quoted):
        return None
    return "the line names a password, token or secret, so its text is not shown"


#: What a file encrypted whole says of a variable name that is not Ansible's form: elsewhere a warning names it and
#: it is taken; here naming it would print the file's text (a secret pasted as a key), and taking it would list it.
SEALED_DOUBT = (f"{VAR_NAME_KIND} (not ASCII letters, digits and '_', Ansible's rule: taken with a warning naming it "
                "elsewhere, refused where the name may not be shown); rename it")


def sealed_doubts(doubts: list[tuple[str, str]], path: Path | str, why: str | None = None) -> None:
    """Raise :func:`sealed_error` for the first of ``doubts`` (variable names not Ansible's form, as
    :func:`~.model.var_name` collects them) met in ``path``, a file ansible-vault encrypted whole, or one other
    users may not read (``why``: :func:`private_mode`'s words; a copy of /etc/shadow in group_vars/ listed each
    line, its password hash with it, as a variable name, in a warning and in `hosts --host`)."""
    if doubts:
        raise sealed_error(SourceError(f"{doubts[0][0]}: (not shown)", SEALED_DOUBT), path, why)


#: A character no variable name of a real inventory holds, beyond Ansible's form (letters, digits, `_`) and the
#: hyphens and dots ansible-core takes with a warning.
_NOT_A_NAME_PART = re.compile(r"[^\w.-]")


def private_doubts(doubts: list[tuple[str, str]], path: Path | str) -> None:
    """:func:`sealed_doubts` for the names of ``doubts`` met in ``path`` that hold what no variable name holds
    (``:``, ``$``, ``/``: the ``root:$6$...::`` lines of a copy of /etc/shadow), when ``path`` is a file other users
    may not read (:func:`private_mode`); a hyphen or a dot (``nvidia-driver-branch``) is taken with its warning, as
    Ansible takes it, whatever the file's mode (0600 is ansible-vault's own, and every file's under umask 077)."""
    odd = [d for d in doubts if _NOT_A_NAME_PART.search(d[1])]
    if odd:
        why = private_mode(path)
        if why is not None:
            sealed_doubts(odd, path, why)


def load_yaml_lines(path: Path, text: str | None = None, vault: Vault | None = None,
                    inside: Path | None = None) -> tuple[Any, KeyLines]:
    """:func:`load_yaml`, and where each mapping key is (:class:`KeyLines`); the errors in a file encrypted whole
    name its line and what is wrong only (:func:`sealed_error`).  ``inside``: as :func:`read_text` takes it."""
    if text is None:
        text, sealed = read_plain(path, vault, inside)
        if sealed:
            try:
                return _load_yaml_lines(path, text, vault, True)
            except (InventoryError, SourceError) as e:
                raise sealed_error(e, path) from None
    return _load_yaml_lines(path, text, vault, False)


try:  # libyaml's scanner and parser, which PyYAML's wheels carry
    from yaml._yaml import CParser as _CParser
except ImportError:  # pragma: no cover - a PyYAML built without libyaml: the pure-Python loader alone
    _CParser = None


if _CParser is not None:
    class _FastLoader(_CParser, _Loader):
        """libyaml's scanner and parser (C) under :class:`_Loader`'s composer, resolver and constructors (Python):
        the same document in under half the time (40,000 hosts: 8.4 s -> 3.8 s, medians of three paired reads on
        the busy 2-core machine).  libyaml's own composer recurses in C without a bound (a list nested 100,000 deep
        ends the process with SIGSEGV), so PyYAML's composes the nodes: too deep a document is a RecursionError
        there, told as one line."""
        get_single_node = yaml.composer.Composer.get_single_node
        check_node = yaml.composer.Composer.check_node
        get_node = yaml.composer.Composer.get_node

        def __init__(self, text: str, name: str):
            stream = io.StringIO(text)
            stream.name = name  # marks name the file, as _Loader's do
            _CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)


def _load_fast(path: Path, text: str, vault: Vault | None, sealed: bool) -> tuple[Any, KeyLines] | None:
    """The document read by :class:`_FastLoader`, or None where :func:`_load_yaml_lines`' own reading must decide:
    no libyaml, a character the pure-Python reader refuses (libyaml's set differs), or any error at all (the
    pure-Python reader names its line and column exactly, as it did before this path existed).

    What libyaml takes is taken, as Ansible takes it (its loader is libyaml's): a tab after a key's colon or at a
    line's end, a block scalar's header followed by ``#``, a BOM at the start of a later line, which PyYAML's own
    reader refuses or reads otherwise (tests/unit/test_inventory_corpus.py holds each to ``ansible-inventory``)."""
    if _CParser is None or yaml.reader.Reader.NON_PRINTABLE.search(text):
        return None
    loader = _FastLoader(text, str(path))
    loader.key_lines = {}
    loader.vault = vault
    try:
        data = loader.get_single_data()
    except Exception:  # noqa: BLE001 - any error is told by the reference reader, read again
        return None
    finally:
        loader.dispose()
    return ((vault or Vault()).hide(data) if sealed else data), KeyLines(loader.key_lines, sealed)


def _load_yaml_lines(path: Path, text: str, vault: Vault | None, sealed: bool) -> tuple[Any, KeyLines]:
    fast = _load_fast(path, text, vault, sealed)
    if fast is not None:
        return fast
    try:
        loader = _Loader(text)  # the reader checks every character here: a NUL is refused before parsing
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, e.position) + 1
        raise _error(f"{path}:{line}: character U+{int(e.character):04X} is not allowed in YAML (a binary file, "
                     "or not the inventory?); fix the path or the file", "a character not allowed in YAML") from None
    loader.name = str(path)  # marks name the file, not "<unicode string>"
    loader.key_lines = {}
    loader.vault = vault
    try:
        data = loader.get_single_data()
        # A file encrypted whole holds secrets only (Ansible's advice): every text of it is one.
        return ((vault or Vault()).hide(data) if sealed else data), KeyLines(loader.key_lines, sealed)
    except yaml.MarkedYAMLError as e:
        m = e.problem_mark or e.context_mark
        where = f"{path}:{m.line + 1}:{m.column + 1}" if m else str(path)
        raise _error(f"{where}: YAML error: {e.problem or e.context}; fix the syntax there",
                     _YAML_KINDS.get(type(e).__name__, "a YAML syntax error"), YamlSyntaxError) from None
    except yaml.YAMLError as e:  # pragma: no cover - unmarked errors are rare
        raise InventoryError(f"{path}: YAML error: {e}") from None
    except RecursionError:
        raise InventoryError(f"{path}: YAML nested too deeply to read; flatten it") from None
    finally:
        loader.dispose()
