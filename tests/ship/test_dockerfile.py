"""Dockerfile: checked by reading it (tests/ship/test_image.py builds and runs it)."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from dataclasses import dataclass, field

import pytest

from tests.support.ship import CHART, ROOT, load_yaml

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
COMPILERS = ("gcc", "g++", "cc ", "clang", "build-essential", "make ", "libpq-dev", "python3-dev")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)


def parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages) from Dockerfile text; continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = rest.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), words[0])
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base, name))
        elif keyword == "ARG" and not stages:
            key, _, default = rest.partition("=")
            args[key] = default
        elif stages:
            stages[-1].instructions.append((keyword, rest.strip()))
    return args, stages


@pytest.mark.parametrize(
    ("text", "bases", "final_user"),
    [
        ("FROM a AS b\nRUN x\nFROM c\nUSER 1:1\n", ["a", "c"], "1:1"),
        ("ARG P=img:1\nFROM ${P} AS build\nFROM ${P}\nUSER 5\n", ["img:1", "img:1"], "5"),
        ("FROM a\nRUN one \\\n  two\nUSER app\n", ["a"], "app"),
    ],
)
def test_parser(text: str, bases: list[str], final_user: str) -> None:
    _, stages = parse(text)
    assert [s.base for s in stages] == bases
    assert dict(stages[-1].instructions)["USER"] == final_user


def stages() -> list[Stage]:
    return parse(DOCKERFILE.read_text())[1]


def final() -> Stage:
    return stages()[-1]


def test_multi_stage_on_a_slim_python_base() -> None:
    assert len(stages()) >= 2
    for stage in stages():
        assert re.fullmatch(r"python:3\.11[\w.-]*-slim[\w.-]*", stage.base), stage.base


def test_final_stage_runs_as_numeric_non_root_user_matching_the_chart() -> None:
    user = dict(final().instructions)["USER"]
    match = re.fullmatch(r"(\d+)(?::(\d+))?", user)
    assert match, f"USER must be numeric (uid[:gid]) so runAsNonRoot can be verified, got {user!r}"
    uid = int(match.group(1))
    assert uid > 0
    values = load_yaml(CHART / "values.yaml")
    assert values["podSecurityContext"]["runAsUser"] == uid
    assert values["securityContext"]["runAsUser"] == uid


def test_final_stage_installs_no_compilers_and_builds_nothing() -> None:
    for keyword, rest in final().instructions:
        assert keyword != "RUN", f"the runtime stage should only copy the built venv, found RUN {rest}"
        lowered = f" {rest.lower()} "
        assert not any(c in lowered for c in COMPILERS), rest
    copies = [rest for kw, rest in final().instructions if kw == "COPY"]
    assert copies and all(c.startswith("--from=") for c in copies), "runtime gets files only from the build stage"


def test_entrypoint_is_the_pgwork_console_script() -> None:
    entry = json.loads(dict(final().instructions)["ENTRYPOINT"])
    assert entry == ["pgwork"]
    assert 'pgwork = "pgwork.cli:main"' in (ROOT / "pyproject.toml").read_text()


def test_one_image_serves_operator_worker_reaper_and_console() -> None:
    install = next(rest for kw, rest in stages()[0].instructions if kw == "RUN" and "pip install" in rest)
    # The operator extra (kopf, kubernetes) and the ui extra (the chart's optional console).
    assert ".[operator,ui]" in install, "the operator and ui extras must be in the one image"


def dockerignore_patterns() -> list[str]:
    return [line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")]


def ignored(path: str) -> bool:
    return any(fnmatch.fnmatch(path, p) or path.startswith(p.rstrip("/") + "/") for p in dockerignore_patterns())


def test_build_context_sources_exist_and_are_not_ignored() -> None:
    for stage in stages():
        for kw, rest in stage.instructions:
            if kw != "COPY" or rest.startswith("--from="):
                continue
            *sources, _dest = shlex.split(rest)
            for src in sources:
                assert (ROOT / src).exists(), f"COPY {src}: not in the repository"
                assert not ignored(src), f"COPY {src}: excluded by .dockerignore"


@pytest.mark.parametrize("path", [".git", "tools", "tests", ".venv", "charts", "pgwork/__pycache__"])
def test_dockerignore_keeps_the_context_small(path: str) -> None:
    assert ignored(path)


def test_read_only_root_filesystem_is_safe() -> None:
    env = " ".join(rest for kw, rest in final().instructions if kw == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env


def test_venv_options_is_a_build_argument_empty_by_default() -> None:
    """`--build-arg VENV_OPTIONS=--system-site-packages` (with PYTHON_IMAGE a CUDA/PyTorch base) lets
    the venv see the base's torch; by default the venv holds only what pgwork installs. The build
    with it is tested in tests/ship/test_image.py."""
    build = stages()[0]
    declared = [rest for kw, rest in build.instructions if kw == "ARG" and rest.startswith("VENV_OPTIONS")]
    assert declared == ['VENV_OPTIONS=""'], "declared in the build stage (after FROM), empty by default"
    venv = next(rest for kw, rest in build.instructions if kw == "RUN" and "-m venv" in rest)
    assert venv == "python -m venv ${VENV_OPTIONS} /opt/pgwork"
    assert "VENV_OPTIONS=${PGWORK_VENV_OPTIONS:-}" in (ROOT / "scripts" / "build-image.sh").read_text()
