"""Jinja2 templates of roles: ``templates/<role>/``, StrictUndefined."""
from __future__ import annotations

import threading
from pathlib import Path

from ..errors import InputError

__all__ = ["Templates"]


class Templates:
    """Renders the project's templates; an undefined variable is an error."""

    def __init__(self, root: Path):
        # Imported here, not with the module: a run's first round trips overlap it (bringup.engine.ahead).
        import jinja2

        self.root = root
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(root)),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
            autoescape=False,
        )
        # The label a managed container carries its revision in: one name for templates and resources.
        from ..resources.compose import REVISION_LABEL

        self.env.globals["revision_label"] = REVISION_LABEL
        # Hosts render in parallel threads: Jinja2 caches a compiled template but compiles outside its cache's
        # lock, so 16 hosts starting together compiled the same template 7 times.  One compiles, the rest wait.
        self._loading = threading.Lock()

    def render(self, name: str, **context) -> str:
        """Render ``templates/<name>`` with ``context``; errors name the template."""
        import jinja2

        try:
            with self._loading:
                template = self.env.get_template(name)
            return template.render(**context)
        except jinja2.TemplateNotFound:
            raise InputError(f"template {name!r} not found under {self.root}") from None
        except jinja2.UndefinedError as e:
            raise InputError(f"template {name}: {e.message}; define it in the role defaults or inventory") from None
        except jinja2.TemplateSyntaxError as e:
            raise InputError(f"template {e.filename or name}:{e.lineno}: {e.message}") from None
