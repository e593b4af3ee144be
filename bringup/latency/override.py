"""A model's configuration loaded in place on a running Triton, and the way back to its own.

``invoke tune``'s search and a window sweep (``bench --window-us``, ``tune-window``) load other configurations
of a model through Triton's model control API (a config override: nothing on disk changes, nothing records
it).  :class:`Override` loads them and knows what serves; however the work in its ``with`` block ends early
it loads the model's own configuration back and ends in one line:

* a signal (:class:`~bringup.ssh.stop.Interrupted`, once a :class:`~bringup.ssh.stop.Stop` was asked): the line says
  what was measured and what Triton serves now; the signal's exit code is the caller's;
* Triton no longer answering (killed, restarted): :class:`TritonUnreachable` (a Triton gone serves the
  model's own configuration from its repository when it starts again: nothing to load back);
* Triton refusing, a client process failing: :class:`~bringup.errors.BringupError`.

A second signal closes the client (:func:`bringup.ssh.stop.closes`), which ends a load waiting on a Triton
that answers nothing; the line then says what may still serve.

What no ``with`` block survives (a SIGKILL, the control machine lost) is left to the trial record
(:class:`~.trial.TrialMark`, given as ``trial``): written on the host before the first other configuration is
loaded, removed once the model's own serves again; the next tune or provision reads it and loads the own back.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..errors import BringupError
from ..ssh.stop import Interrupted, closes
from .window import WindowError, load_config

if TYPE_CHECKING:
    from ..ssh.stop import Stop
    from .target import Target
    from .trial import TrialMark

__all__ = ["Override", "TritonUnreachable", "lost", "exc_text", "load_own"]


class TritonUnreachable(Exception):
    """Triton did not answer at the target's gRPC address."""


def exc_text(e) -> str:
    """The first line of a tritonclient error (its message, not its status prefix)."""
    return str(e.message() if hasattr(e, "message") and callable(e.message) else e).strip().splitlines()[0]


def lost(client, target: Target, e: Exception, what: str) -> Exception:
    """What Triton's failure ``e`` in the middle of ``what`` ends the task with: :class:`TritonUnreachable`
    when the server no longer answers (killed, restarted, its host gone), else one BringupError line."""
    try:
        live = client.is_server_live(client_timeout=5)
    except Exception:  # noqa: BLE001 - not answering is the answer
        live = False
    if not live:
        return TritonUnreachable(f"Triton at {target.url} (host {target.host}) stopped answering during {what} "
                                 f"({exc_text(e)}); when it starts again it loads {target.model}'s own "
                                 "configuration from its repository")
    return BringupError(f"Triton at {target.url} (host {target.host}) failed during {what}: {exc_text(e)}")


class Override:
    """What serves in place of ``target``'s model's own ``config`` while a search or sweep runs.

    ``what``: the work, for the lines (``the search``); ``measured()``: how many of its ``unit`` were
    measured so far; ``unsaved``: what a cut-short run did not write (``nothing recorded``).
    """

    def __init__(self, client, target: Target, config: dict, stop: Stop | None, *, what: str, unit: str,
                 measured: Callable[[], int], unsaved: str, trial: TrialMark | None = None,
                 timeout: float | None = None) -> None:
        self.client, self.target, self.config, self.stop = client, target, config, stop
        #: Seconds one load may take, its ready wait included (None: :data:`~.tritongrpc.LOAD_S`).
        self.timeout = timeout
        self.trial = trial
        self.what, self.unit, self.measured, self.unsaved = what, unit, measured, unsaved
        #: What serves in place of the model's own configuration, in words (None: its own).
        self.serving: str | None = None
        self._close = closes(stop, client.close)

    def load(self, config: dict, label: str | None) -> None:
        """Load ``config`` (``label``: what it is, in words; None: the model's own), unless a stop was asked."""
        if self.stop is not None:
            self.stop.check("before loading " + (label or "the model's own configuration"))
        if label is not None and self.trial is not None:
            self.trial.mark(label)  # on the host, whole, before Triton serves anything else
        load_config(self.client, self.target.model, config, self.timeout)
        self.serving = label
        if label is None and self.trial is not None:
            self.trial.clear()

    def own_again(self) -> str:
        """Load the model's own configuration back; how it went, in words that end a line (a failure is said,
        never raised: the first failure is the one to report)."""
        model, was = self.target.model, self.serving
        if was is None:
            return f"{model} serves its own configuration (it was not changed)"
        try:
            load_config(self.client, model, self.config, self.timeout)
        except Exception as e:  # noqa: BLE001 - said in the line
            if self.stop is not None and self.stop.abandoned:
                return (f"{self.stop.name} again abandoned loading {model}'s own configuration back: Triton may "
                        f"still serve {was} until it starts again")
            why = exc_text(e) if str(e).strip() else type(e).__name__
            return (f"loading {model}'s own configuration back failed ({why}): Triton may still serve {was}; it "
                    "loads the model's own configuration from its repository when it starts again, or once its "
                    f"config.pbtxt is touched and POST /v2/repository/models/{model}/load is sent (Triton reloads "
                    "a model without an override only when its files changed)")
        self.serving = None
        if self.trial is not None:
            self.trial.clear()
        return f"{model} serves its own configuration again"

    def __enter__(self) -> "Override":
        return self

    def __exit__(self, typ, e, tb) -> bool:
        from tritonclient.utils import InferenceServerException

        try:
            if typ is None:
                return False
            done = f"after {self.measured()} {self.unit} measured"
            if self.stop is not None and self.stop.abandoned and not isinstance(e, Interrupted):
                # A second signal closed the clients under a call that waited on Triton: that call's error.
                e = Interrupted(f"interrupted by {self.stop.name} twice")
            if isinstance(e, Interrupted):
                raise Interrupted(f"{e} {done}: {self.own_again()}; {self.unsaved}") from None
            if isinstance(e, (InferenceServerException, WindowError)):
                why = lost(self.client, self.target, e, f"{self.what} ({done})")
                if isinstance(why, TritonUnreachable):
                    raise why from None   # a Triton gone is given nothing back: its next start serves the own
                raise BringupError(f"{why}; {self.own_again()}") from None
            if isinstance(e, RuntimeError):   # a client process failed
                raise BringupError(f"{self.what} of {self.target.host} stopped: {e}; {self.own_again()}") from None
            self.own_again()   # anything else: the model's own configuration, and the error as it is
            return False
        finally:
            self._close()


def load_own(target: Target, config: dict, serving: str, trial: TrialMark | None = None,
             timeout: float | None = None) -> str:
    """After a search that left ``serving`` loaded in place of the model's own ``config`` (its result, which
    could then not be recorded): the model's own configuration back, through a client of its own, the load
    given ``timeout`` seconds (None: :data:`~.tritongrpc.LOAD_S`); how it went, in words that end a line."""
    from .tritongrpc import client as triton_client

    client = triton_client(target.url)
    back = Override(client, target, config, None, what="the search", unit="configuration(s)", measured=lambda: 0,
                    unsaved="", trial=trial, timeout=timeout)
    back.serving = serving
    try:
        return back.own_again()
    finally:
        client.close()
