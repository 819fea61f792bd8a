"""The ``torchport`` command: one module per subcommand, heavy imports inside handlers."""

from __future__ import annotations

import os
import signal
import sys
from importlib import import_module
from typing import Any

import click

SUBCOMMANDS = (
    "run",
    "evaluate",
    "suites",
    "cases",
    "runs",
    "show",
    "results",
    "search",
    "compare",
    "matrix",
    "baseline",
    "gate",
    "note",
    "export",
    "import",
    "migrate",
    "doctor",
    "serve",
    "report",
)


class UsageProblem(click.ClickException):
    """Bad input: one line naming the problem and the fix, exit code 2."""

    exit_code = 2

    def show(self, file=None):
        # One line whatever the message quotes (a path or a label with a newline or ESC in it).
        click.echo(f"torchport: error: {one_line(self.format_message())}", err=True)


# click >= 8.2 raises this for a group called with no arguments (its message is the help).
_NO_ARGS: type[click.UsageError] = getattr(
    click.exceptions, "NoArgsIsHelpError", type("_Never", (click.UsageError,), {})
)


def one_line(message: str) -> str:
    """``message`` on one printable line (a path or a label may hold a newline or ESC)."""
    return "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in message
    )


class LazyGroup(click.Group):
    """Imports a subcommand's module only when that subcommand runs (fast ``--help``).

    A usage error (an unknown option, a value out of range) is one line and exit 2, like
    every other bad input, not click's usage block."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        run: Any = super().main
        if not standalone_mode:
            return run(*args, standalone_mode=False, **kwargs)
        from torchport.settings import SettingError, check_all

        try:
            check_all()  # every TORCHPORT_* variable, before any work starts
            code = run(*args, standalone_mode=False, **kwargs)
        except SettingError as exc:
            click.echo(f"torchport: error: {one_line(str(exc))}", err=True)
            sys.exit(2)
        except _NO_ARGS as exc:  # a bare ``torchport`` or group: the help, as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            hint = f"; see {exc.ctx.command_path} --help" if exc.ctx else ""
            message = one_line(exc.format_message()).rstrip(".")
            click.echo(f"torchport: error: {message}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort as exc:
            # click turns Ctrl-C (and SIGTERM, raised as Terminated) into Abort: the shell's
            # codes, 130 and 143, tell a caller which it was
            if isinstance(exc.__cause__, Terminated):
                sys.exit(128 + signal.SIGTERM)
            if isinstance(exc.__cause__, KeyboardInterrupt):
                sys.exit(130)
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def list_commands(self, ctx):
        return list(SUBCOMMANDS)

    def get_command(self, ctx, name):
        if name not in SUBCOMMANDS:
            return None
        return import_module(f"torchport.interfaces.cli.{name}_cmd").command


@click.group(cls=LazyGroup)
@click.version_option(package_name="torchport")
def cli():
    """Evidence that PyTorch work runs on an accelerator: correctly, on the device, and fast."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, so that what it holds is let go on the way out
    as for Ctrl-C: a temporary output removed (interfaces/output.py), a forked reader ended
    (kb/forked.py), a child process killed; the exit code is then 143 (128 + 15)."""


def _terminated(signum, frame):
    raise Terminated()


def _swallowed(unraisable: Any, _default=sys.unraisablehook) -> None:
    """Where Python drops an exception (an at-fork callback, a ``__del__``, a weakref
    callback) a SIGTERM's Terminated would be printed and lost, and the command go on: the
    signal is sent again a moment later, from a thread, so that its handler runs once the
    main thread has left that place (sent from here, it would run inside this hook, which
    drops it too) (docs/reliability.md, Round 3)."""
    if isinstance(unraisable.exc_value, Terminated):
        import threading

        again = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGTERM))
        again.daemon = True
        again.start()
        return
    _default(unraisable)


def main(argv=None):
    # Building shrunk configs makes transformers warn once per architecture, which would bury
    # the progress and tables; TRANSFORMERS_VERBOSITY set by the user still wins.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    # A command that handles SIGTERM itself (run, import, a matrix's child run) sets its own
    # handler for its span and puts this one back.
    signal.signal(signal.SIGTERM, _terminated)
    sys.unraisablehook = _swallowed
    try:
        cli.main(args=argv, prog_name="torchport", standalone_mode=True)
    except Terminated:
        sys.exit(128 + signal.SIGTERM)
    except KeyboardInterrupt:
        sys.exit(130)
