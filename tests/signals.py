"""Start a process as from a terminal, whatever started the test run."""

from __future__ import annotations

import signal


def as_from_a_terminal() -> None:
    """A Popen preexec_fn: INT and QUIT at their default actions, as a command typed in a terminal
    has them. A background job of a non-interactive shell (as CI may start the suite) has them
    ignored, and every process under it inherits that: make would then ignore a Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
