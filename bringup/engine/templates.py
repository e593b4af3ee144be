"""Jinja2 templates of roles: ``templates/<role>/``, StrictUndefined."""
from __future__ import annotations

import os
import stat
import sys
import threading
from pathlib import Path

from ..errors import InputError

__all__ = ["Templates"]


class Templates:
    """Renders the project's templates; an undefined variable is an error."""

    def __init__(self, root: Path):
        self.root = root
        # Hosts render in parallel threads: Jinja2 caches a compiled template but compiles outside its cache's
        # lock, so 16 hosts starting together compiled the same template 7 times.  One compiles, the rest wait.
        self._loading = threading.Lock()
        self._env = None

    @property
    def env(self):
        """The Jinja2 environment, made at the first render: Jinja2 (~15 ms to import, ~30 ms with the environment)
        loads only where a template is rendered, and then while the run's first round trip is out (a run that
        checks its input renders nothing unless a role's check does: bringup.engine.ahead)."""
        with self._loading:
            if self._env is None:
                self._env = self._environment()
            return self._env

    def _environment(self):
        import jinja2

        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(self.root)),
            bytecode_cache=_bytecode_cache(self.root),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
            autoescape=False,
        )
        # The label a managed container carries its revision in: one name for templates and resources.
        from ..resources.compose import REVISION_LABEL

        env.globals["revision_label"] = REVISION_LABEL
        return env

    def render(self, name: str, **context) -> str:
        """Render ``templates/<name>`` with ``context``; errors name the template."""
        import jinja2

        env = self.env
        try:
            with self._loading:
                template = env.get_template(name)
            return template.render(**context)
        except jinja2.TemplateNotFound:
            raise InputError(f"template {name!r} not found under {self.root}") from None
        except jinja2.UndefinedError as e:
            raise InputError(f"template {name}: {e.message}; define it in the role defaults or inventory") from None
        except jinja2.TemplateSyntaxError as e:
            raise InputError(f"template {e.filename or name}:{e.lineno}: {e.message}") from None


#: The largest compiled template read back (a template's code is kilobytes).
_CACHE_MAX = 8 << 20


def _bytecode_cache(root: Path):
    """Jinja2's compiled templates kept beside Python's bytecode of the project (``templates/__pycache__``, or under
    ``PYTHONPYCACHEPREFIX``), as a ``.pyc`` is: a run compiled every template it rendered again (a full provision:
    12 templates, ~15 ms of each run between the facts and the state read).  Jinja2 checks each against its
    template's source (a changed template is compiled again) and its own version; written only where Python
    writes bytecode (not under ``-B`` / ``PYTHONDONTWRITEBYTECODE``), never where it cannot (an install the user
    cannot write: compiled each run, as before).  What it holds is code, trusted as the ``.pyc`` beside it is:
    read only from a regular file of the user's own, at most :data:`_CACHE_MAX` bytes; anything else is compiled
    afresh."""
    import importlib.util

    import jinja2

    try:
        folder = Path(importlib.util.cache_from_source(str(root / "__init__.py"))).parent
    except (NotImplementedError, ValueError):  # pragma: no cover - an interpreter without a bytecode cache
        return None

    class Compiled(jinja2.FileSystemBytecodeCache):
        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            name = self._get_cache_filename(bucket)
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                return
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(fd)
                if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and st.st_size <= _CACHE_MAX:
                    bucket.load_bytecode(f)

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            if sys.dont_write_bytecode:
                return
            try:
                folder.mkdir(parents=True, exist_ok=True)
                super().dump_bytecode(bucket)  # a temporary file renamed into place: never a partial one
            except OSError:
                pass

    return Compiled(str(folder), "jinja2-%s.cache")
