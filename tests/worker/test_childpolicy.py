"""Process isolation's pure decisions, as tables: a dead child's last_error, recycling, sizes."""

from __future__ import annotations

import pytest

from pgwork.worker.childpolicy import death_message, killed_message, parse_size, recycle_reason
from pgwork.worker.command import handlers_on_threads
from pgwork.worker.options import OptionError, WorkerOptions, parse_options
from pgwork.worker.registry import Registry


@pytest.mark.parametrize(
    ("exitcode", "seconds", "text"),
    [
        (-9, 2.44, "handler process died: signal 9 (killed) after 2.4 s"),
        (-11, 0.05, "handler process died: signal 11 (segmentation fault) after 0.1 s"),
        (-6, 1.0, "handler process died: signal 6 (aborted) after 1.0 s"),
        (3, 0.1, "handler process died: exit code 3 after 0.1 s"),
        (None, 0.0, "handler process died: its pipe closed, exit status unknown, after 0.0 s"),
    ],
)
def test_death_message(exitcode: int | None, seconds: float, text: str) -> None:
    assert death_message(exitcode, seconds) == text


def test_killed_message_names_why_and_how_long() -> None:
    assert killed_message("it ignored the stop request (cancelled) for 5s", 7.5) == (
        "handler process killed: it ignored the stop request (cancelled) for 5s; it had run 7.5s"
    )


@pytest.mark.parametrize(
    ("jobs", "rss", "max_jobs", "max_memory", "recycled"),
    [
        (1, 10 << 20, 0, 0, None),
        (2, 10 << 20, 2, 0, "it ran 2 jobs (--max-jobs-per-child 2)"),
        (1, 10 << 20, 2, 0, None),
        (1, 600 << 20, 0, 512 << 20, "its memory is 600 MiB (--max-memory-per-child 512 MiB)"),
        (1, 500 << 20, 0, 512 << 20, None),
    ],
)
def test_recycle_reason(jobs: int, rss: int, max_jobs: int, max_memory: int, recycled: str | None) -> None:
    assert recycle_reason(jobs, rss, max_jobs=max_jobs, max_memory=max_memory) == recycled


@pytest.mark.parametrize(
    ("text", "size"),
    [("0", 0), ("2147483648", 2 << 30), ("512Mi", 512 << 20), ("4Gi", 4 << 30), ("2G", 2 * 10**9), ("64k", 64000)],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size  # as Kubernetes reads the JobQueue's maxMemoryPerChild


@pytest.mark.parametrize("text", ["", "lots", "2GB", "-1Gi", "1.5gi"])
def test_parse_size_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="is not a size"):
        parse_size(text)


@pytest.mark.parametrize(
    ("values", "option"),
    [
        ({"isolation": "fork"}, "--isolation"),
        ({"max_jobs_per_child": "-1"}, "--max-jobs-per-child"),
        ({"max_memory_per_child": "lots"}, "--max-memory-per-child"),
    ],
)
def test_bad_isolation_options_name_the_option(values: dict[str, str], option: str) -> None:
    with pytest.raises(OptionError) as caught:
        parse_options(app="m", worker_id="w", environ={}, **values)  # type: ignore[arg-type]
    assert caught.value.option == option


def test_isolation_options_parse() -> None:
    o = parse_options(
        app="m", worker_id="w", environ={}, isolation="process", max_jobs_per_child="100", max_memory_per_child="4Gi"
    )
    assert (o.isolation, o.max_jobs_per_child, o.max_memory_per_child) == ("process", 100, 4 << 30)


@pytest.mark.parametrize("memory", ["4Gi", "512Mi", "2G", "1073741824"])
def test_the_operators_rendered_isolation_flags_are_what_the_worker_reads(memory: str) -> None:
    from pgwork.cli import build_parser
    from pgwork.operator.workerflags import WorkerFlags
    from pgwork.worker.command import options_from_args

    flags = WorkerFlags(isolation="process", max_jobs_per_child=500, max_memory_per_child=memory).args()
    args = build_parser().parse_args(["worker", "--app", "m", "--id", "w", *flags])
    options = options_from_args(args)
    assert (options.isolation, options.max_jobs_per_child) == ("process", 500)
    assert options.max_memory_per_child == parse_size(memory) > 0


@pytest.mark.parametrize(
    ("isolation", "a", "b", "job_types", "on_threads"),
    [
        ("thread", None, None, None, True),  # the default: handlers on the worker's threads
        ("process", None, None, None, False),  # every handler in a child: the worker runs none
        ("process", None, "thread", None, True),  # one handler chose threads itself
        ("thread", "process", "process", None, False),
        ("thread", "process", None, ("a",), False),  # only the type that runs in children is taken
        ("thread", "process", None, None, True),
    ],
)
def test_the_worker_keeps_freed_memory_only_where_handlers_run_on_its_threads(
    isolation: str, a: str | None, b: str | None, job_types: tuple[str, ...] | None, on_threads: bool
) -> None:
    registry = Registry()
    registry.register("a", lambda job: None, isolation=a)
    registry.register("b", lambda job: None, isolation=b)
    options = WorkerOptions(app="m", worker_id="w", isolation=isolation, job_types=job_types)
    assert handlers_on_threads(registry, options) is on_threads
