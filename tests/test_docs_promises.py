"""What a reader copies from the docs works: every `pgwork` command and flag shown in a code block
exists in the real `pgwork --help`, and every metric docs/metrics.md names is exported (and every
exported metric is named there)."""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pgwork.operator.metrics import OperatorMetrics
from pgwork.worker.metrics import WorkerMetrics

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_SHELL = {"yaml", "python", "json", "sql", "promql", "toml", "ini"}


def shell_blocks(page: Path) -> list[str]:
    blocks = re.findall(r"^```([a-z]*)\n(.*?)^```", page.read_text(), flags=re.DOTALL | re.MULTILINE)
    return [body for lang, body in blocks if lang not in NOT_SHELL]


def pgwork_commands(block: str) -> list[list[str]]:
    """Each `pgwork ...` invocation in a shell block, as tokens (continuations joined, comments dropped)."""
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:  # an unbalanced quote in prose-like text: not a command
            continue
        segment: list[str] = []
        for token in [*tokens, ";"]:
            if token in {"|", ";", "&&", "||", "&"}:
                if segment and segment[0] == "pgwork":
                    commands.append(segment)
                segment = []
            else:
                segment.append(token.strip("[]"))
    return commands


def documented_commands() -> list[tuple[str, list[str]]]:
    found = []
    for page in PAGES:
        for block in shell_blocks(page):
            found += [(page.name, command) for command in pgwork_commands(block)]
    return found


@functools.cache
def help_text(*subcommand: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pgwork.cli", *subcommand, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, f"pgwork {' '.join(subcommand)} --help failed: {done.stderr}"
    return done.stdout


def subcommands() -> set[str]:
    listing = help_text().split("positional arguments:", 1)[1]
    return set(re.findall(r"^    ([a-z][a-z-]*)\b", listing, flags=re.MULTILINE))


def split(command: list[str]) -> tuple[str | None, list[str]]:
    """(subcommand, flags): the first word that is neither a global option nor its value, and every --flag."""
    words = command[1:]
    sub = None
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--dsn":
            i += 2
            continue
        if not word.startswith("-"):
            sub = word
            break
        i += 1
    flags = [w.split("=", 1)[0] for w in words if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", w)]
    return sub, flags


def test_the_docs_show_commands_at_all() -> None:
    commands = documented_commands()
    assert len(commands) >= 20, commands
    assert {"worker", "migrate", "enqueue"} <= {split(c)[0] for _, c in commands}


@pytest.mark.parametrize(("page", "command"), documented_commands(), ids=lambda v: v if isinstance(v, str) else None)
def test_documented_command_exists(page: str, command: list[str]) -> None:
    sub, flags = split(command)
    if sub is None or command[1:] == ["--help"] or command[1:] == ["--version"]:
        return
    assert sub in subcommands(), f"{page}: `{' '.join(command)}` uses unknown subcommand {sub!r}"
    known = set(re.findall(r"--[a-z][a-z0-9-]*", help_text(sub) + help_text()))
    unknown = [f for f in flags if f not in known]
    assert not unknown, f"{page}: `{' '.join(command)}` uses flags that `pgwork {sub} --help` does not list: {unknown}"


def test_the_command_parser_sees_unknown_flags() -> None:
    sub, flags = split(["pgwork", "--dsn", "x", "worker", "--app", "m", "--made-up=1"])
    assert sub == "worker" and flags == ["--dsn", "--app", "--made-up"]
    assert "--made-up" not in help_text("worker")


def documented_metrics() -> set[str]:
    text = (ROOT / "docs" / "metrics.md").read_text()
    return set(re.findall(r"^(?:\| |- )`(pgwork_[a-z_]+)`", text, flags=re.MULTILINE))


def exported_metrics() -> set[str]:
    names = set()
    for registry in (WorkerMetrics().registry, OperatorMetrics().registry):
        for family in registry.collect():
            names.add(family.name + "_total" if family.type == "counter" else family.name)
    return names


def test_every_documented_metric_is_exported() -> None:
    documented = documented_metrics()
    assert len(documented) >= 10
    assert documented - exported_metrics() == set(), "docs/metrics.md names metrics nobody exports"


def test_every_exported_metric_is_documented() -> None:
    assert exported_metrics() - documented_metrics() == set(), "exported but missing from docs/metrics.md"


@pytest.mark.parametrize(("package", "next_heading"), [("worker", "  operator/"), ("operator", "  tools/")])
def test_the_architecture_map_names_every_module(package: str, next_heading: str) -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index(f"\n  {package}/ ")
    section = text[start : text.index(next_heading, start + 1)]
    named = set(re.findall(r"^\s+(\w+\.py)\b", section, flags=re.MULTILINE))
    files = {p.name for p in (ROOT / "pgwork" / package).glob("*.py")}
    assert files - named == set(), f"docs/architecture.md's map: give each {package}/ module its line"
    assert named - files == set(), f"docs/architecture.md's map names {package}/ modules that do not exist"
