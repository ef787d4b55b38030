"""The command line's shared options and its "did you mean": a table for the pure part, then the
`pgwork` command as a user types it, against a real database."""

from __future__ import annotations

import json

import pytest

from pgwork.cli_parser import explain, suggestion
from pgwork.worker.options import OptionError, parse_options
from tests.support.cli import pgwork

COMMANDS = "'migrate', 'grant', 'enqueue', 'stats', 'running', 'worker', 'bench'"


@pytest.mark.parametrize(
    ("given", "candidates", "expected"),
    [
        ("stat", ["stats", "running", "retry"], "stats"),
        ("wroker", ["reader", "producer", "worker"], "worker"),
        ("--concurreny", ["--concurrency", "--batch"], "--concurrency"),
        ("--jsn", ["--json", "--dsn"], "--json"),  # the closer one, not the first
        ("frobnicate", ["stats", "running"], None),  # nothing close: no guess
        ("", ["stats"], None),
    ],
)
def test_suggestion(given: str, candidates: list[str], expected: str | None) -> None:
    assert suggestion(given, candidates) == expected


@pytest.mark.parametrize(
    ("message", "options", "expected_tail"),
    [
        (f"argument COMMAND: invalid choice: 'stat' (choose from {COMMANDS})", [], "; did you mean 'stats'?"),
        (f"argument COMMAND: invalid choice: 'zzz' (choose from {COMMANDS})", [], f"{COMMANDS})"),
        ("unrecognized arguments: --jsn", ["--json", "--dsn"], "; did you mean --json for --jsn?"),
        ("unrecognized arguments: --concurreny=3", ["--concurrency"], "did you mean --concurrency for --concurreny?"),
        ("unrecognized arguments: extra words", ["--json"], "unrecognized arguments: extra words"),
        ("the following arguments are required: --app", ["--app"], "required: --app"),
        ("argument --lease: expected one argument", ["--lease"], "must be attached: --lease=VALUE"),
    ],
)
def test_explain_adds_one_hint_only_when_one_candidate_is_close(
    message: str, options: list[str], expected_tail: str
) -> None:
    explained = explain(message, options)
    assert explained.startswith(message) and explained.endswith(expected_tail)
    assert explained.count("did you mean") <= 1


def test_dsn_after_the_subcommand_is_the_one_used(dsn: str) -> None:
    unreachable = "postgresql://nobody@127.0.0.1:1/nowhere"
    after = pgwork("stats", "--json", "--dsn", dsn, dsn=unreachable)
    assert after.returncode == 0, after.stderr
    assert isinstance(json.loads(after.stdout), list)
    # Given twice, the later one (after the subcommand) wins; given only before, it is kept.
    both = pgwork("--dsn", unreachable, "stats", "--dsn", dsn, "--json")
    assert both.returncode == 0, both.stderr
    before = pgwork("--dsn", dsn, "stats", "--json", dsn=unreachable)
    assert before.returncode == 0, before.stderr
    wrong = pgwork("stats", "--dsn", unreachable)
    assert wrong.returncode == 2 and "cannot connect to nobody@127.0.0.1:1/nowhere" in wrong.stderr


def test_verbose_after_the_subcommand(dsn: str) -> None:
    done = pgwork("migrate", "-v", "--dsn", dsn)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["stat"], "invalid choice: 'stat'"),
        (["stats", "--jsn"], "did you mean --json for --jsn?"),
        (["grant", "bob", "--profile", "wroker"], "did you mean 'worker'?"),
        (["worker", "--app", "x", "--concurreny", "3"], "did you mean --concurrency for --concurreny?"),
        (["bench", "--quik"], "did you mean --quick for --quik?"),
    ],
)
def test_typos_are_answered_with_the_close_match(argv: list[str], expected: str) -> None:
    done = pgwork(*argv)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert expected in last and last.count("did you mean") <= 1
    if argv == ["stat"]:
        assert last.endswith("did you mean 'stats'?")


def test_bench_report_only_needs_a_folder() -> None:
    done = pgwork("bench", "--report-only")
    assert done.returncode == 2 and "--report-only needs --out DIR" in done.stderr


@pytest.mark.parametrize("option", ["lease", "heartbeat", "grace", "poll", "connect_patience"])
@pytest.mark.parametrize("value", ["abc", "-5s", "nan", "5x"])
def test_a_bad_worker_duration_gets_one_hint(option: str, value: str) -> None:
    with pytest.raises(OptionError) as caught:
        parse_options(app="app", worker_id="w", environ={}, **{option: value})
    message = str(caught.value)
    assert message.startswith(f"--{option.replace('_', '-')}: {value!r}")
    assert message.count("(") == 1 and message.endswith(")"), message


def test_a_value_starting_with_a_dash_is_explained() -> None:
    done = pgwork("worker", "--app", "x", "--lease", "-5s")
    assert done.returncode == 2 and "must be attached: --lease=VALUE" in done.stderr
    attached = pgwork("worker", "--app", "x", "--lease=-5s")
    assert "--lease: '-5s' must be a finite duration >= 0 (write 0 or more" in attached.stderr
