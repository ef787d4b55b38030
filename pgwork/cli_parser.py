"""The `pgwork` command line's parser: the options every subcommand shares, and errors that say
what was probably meant.

`pgwork stats --dsn URL` must work as well as `pgwork --dsn URL stats` (people put the option where
they read it: after the command), and `pgwork stat` or `--job-type` should name the close match
instead of only listing everything. Python 3.14's argparse suggests on its own; this parser does
the same on every version we support.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

DSN_HELP = "connection string (default: DATABASE_URL, then libpq PG* variables)"
POOLER_HELP = (
    "transaction behind a transaction-mode pooler such as PgBouncer: no prepared statements, no session "
    "state, LISTEN only on PGWORK_LISTEN_DSN (default: PGWORK_POOLER, else none)"
)

_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<choices>.*)\)")
_EXPECTED_VALUE = re.compile(r"argument (?P<option>--[\w-]+)(?:/-\w)?: expected one argument")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (?P<given>.*)")


def suggestion(given: str, candidates: Iterable[str]) -> str | None:
    """The one candidate `given` was most probably meant to be, if any is close enough."""
    matches = difflib.get_close_matches(given, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def explain(message: str, option_strings: Iterable[str]) -> str:
    """argparse's error message with a "did you mean" added where one candidate is close."""
    if match := _INVALID_CHOICE.search(message):
        choices = re.findall(r"'([^']*)'", match["choices"])
        if near := suggestion(match["given"], choices):
            return f"{message}; did you mean {near!r}?"
        return message
    if match := _EXPECTED_VALUE.search(message):
        # `--lease -5s`: argparse reads a value starting with "-" as the next option.
        return f"{message}; a value that starts with '-' must be attached: {match['option']}=VALUE"
    if match := _UNRECOGNIZED.search(message):
        hints = []
        for word in match["given"].split():
            flag = word.split("=", 1)[0]
            if flag.startswith("--") and (near := suggestion(flag, option_strings)):
                hints.append(f"did you mean {near} for {flag}?")
        if hints:
            return f"{message}; {' '.join(hints)}"
    return message


def name_the_choices(message: str, actions: Iterable[argparse.Action]) -> str:
    """argparse's "the following arguments are required: ACTION" with the actions it could be
    (`pgwork limits` alone: set, show, clear), so nobody needs --help to learn them."""
    if not message.startswith("the following arguments are required:"):
        return message
    for action in actions:
        if (
            isinstance(action, argparse._SubParsersAction)
            and isinstance(action.metavar, str)
            and action.metavar in message
        ):
            return f"{message}; choose one of: {', '.join(action.choices)}"
    return message


class CommandParser(argparse.ArgumentParser):
    """A parser whose errors suggest the close match, and whose subcommands all take --dsn, --pooler and -v.

    The shared options on a subcommand default to "not given" (SUPPRESS), so a value given before
    the subcommand is kept unless it is given again after it. A subcommand that means something
    else by one of them (the lab's own --dsn) defines it again: the later definition wins.
    """

    def __init__(self, *args: Any, common: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("conflict_handler", "resolve")
        super().__init__(*args, **kwargs)
        if common:
            self.add_argument("--dsn", default=argparse.SUPPRESS, help=DSN_HELP)
            self.add_argument("--pooler", default=argparse.SUPPRESS, metavar="MODE", help=POOLER_HELP)
            self.add_argument(
                "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log at debug level"
            )

    def error(self, message: str) -> NoReturn:
        options = [s for action in self._actions for s in action.option_strings if s.startswith("--")]
        message = name_the_choices(message, self._actions)
        # Both on stderr, as argparse's own error() does: stdout may be a pipe into another program.
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {explain(message, options)}\n")


class SubcommandParser(CommandParser):
    """The class argparse makes each subcommand's parser with: the shared options included."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, common=True, **kwargs)


def parse_strictly(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """parse_args, except that arguments nobody knows are reported by the chosen subcommand's parser,
    which knows that subcommand's options (the top-level parser would suggest only its own)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        chosen = _subcommand(parser, getattr(args, "command", None)) or parser
        chosen.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _subcommand(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            chosen: argparse.ArgumentParser = action.choices[name]
            return chosen
    return None
