"""The container image, built by scripts/build-image.sh and run with podman as a user would:
read-only root filesystem, non-root, against the test PostgreSQL over the host network.

The image is built once per session (the script caches the base and the wheelhouse outside the
tree, and podman caches layers), or taken from $PGWORK_IMAGE when that names a built image.
Skips when podman is missing or cannot run containers here, unless $PGWORK_REQUIRE_IMAGE=1 (CI
on a machine that can: then those are failures).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from pgwork.tools.demo import JOB_TYPE, invoices
from tests.support.ship import ROOT
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

BUILD = ROOT / "scripts" / "build-image.sh"
CACHE = Path(os.environ.get("PGWORK_IMAGE_CACHE", "/var/tmp/pgwork-image"))
# Small enough for a pull on every node; the venv with kopf, kubernetes and psycopg is ~140 MiB.
MAX_IMAGE_MIB = 400


def unavailable(why: str) -> None:
    if os.environ.get("PGWORK_REQUIRE_IMAGE") == "1":
        pytest.fail(f"PGWORK_REQUIRE_IMAGE=1 but {why}")
    pytest.skip(why)


@dataclass
class Image:
    tag: str
    env: dict[str, str]
    build_seconds: float | None

    def podman(self, *args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            ["podman", *args], capture_output=True, text=True, env=self.env, timeout=timeout, check=False
        )
        if check:
            assert proc.returncode == 0, f"podman {' '.join(args)}: {proc.stdout}{proc.stderr}"
        return proc

    def run(self, *args: str, dsn: str = "", timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`podman run` the way the chart runs the container: read-only root, no capabilities."""
        return self.podman(
            "run", "--rm", *CONTAINER, *reach(dsn), self.tag, *args, timeout=timeout
        )  # fmt: skip


# As the chart runs it: read-only root, no capabilities; the host's network to reach the test database.
CONTAINER = ("--read-only", "--cap-drop", "ALL", "--network", "host")


def reach(dsn: str) -> list[str]:
    """The container reaches the test database over the host's network; a database only on a Unix
    socket (the embedded server's, in a private 0700 directory) is out of reach of user 10001."""
    host = str(psycopg.conninfo.conninfo_to_dict(dsn).get("host") or "") if dsn else ""
    if host.startswith("/"):
        unavailable(
            f"the test database listens only on a Unix socket in {host}, which the image's user cannot open: "
            "set PGWORK_TEST_DSN=postgresql://postgres@127.0.0.1:5432/test (a TCP server)"
        )
    return []


@pytest.fixture(scope="session")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    if shutil.which("podman") is None:
        unavailable("podman is not installed: run .ci/install-image-tools.sh")
    env = dict(os.environ, CONTAINERS_CONF=str(CACHE / "containers.conf"))
    given = os.environ.get("PGWORK_IMAGE")
    if given:
        image = Image(given, env, None)
        if image.podman("image", "exists", given).returncode == 0:
            return image
    tag = given or "localhost/pgwork:test"
    started = time.monotonic()
    proc = subprocess.run(["bash", str(BUILD), tag], capture_output=True, text=True, timeout=1200, check=False)
    if proc.returncode == 3:  # the script's "cannot build here" (tools missing)
        unavailable(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, f"scripts/build-image.sh failed:\n{proc.stdout}\n{proc.stderr}"
    image = Image(tag, env, time.monotonic() - started)
    probe = image.podman("run", "--rm", "--entrypoint", "true", tag, timeout=60)
    if probe.returncode != 0:
        unavailable(f"podman cannot run containers here: {probe.stderr.strip()[-300:]}")
    print(f"\nimage {tag}: {proc.stderr.strip().splitlines()[-1]}")
    return image


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=3) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def invoice_payload(seconds: float) -> str:
    text = invoices.render(invoices.generate(random.Random(7), 1))
    return json.dumps({"text": text, "work_seconds": seconds, "document": "inv-1"})


def test_help_and_version(image: Image) -> None:
    help_ = image.run("--help")
    assert help_.returncode == 0, help_.stderr
    assert "usage: pgwork" in help_.stdout
    for command in ("migrate", "worker", "operator", "reap"):
        assert command in help_.stdout
    default = image.run()  # CMD is --help
    assert default.returncode == 0 and "usage: pgwork" in default.stdout
    version = image.run("--version")
    assert version.returncode == 0, version.stderr
    assert "0.1.0" in version.stdout + version.stderr


def test_runs_as_the_numeric_non_root_user_on_a_read_only_root(image: Image) -> None:
    user = image.podman("image", "inspect", "--format", "{{.Config.User}}", image.tag, check=True).stdout.strip()
    assert user == "10001:10001"
    probe = image.podman(
        "run", "--rm", "--read-only", "--entrypoint", "python", image.tag, "-c",
        "import os, sys\n"
        "print(os.getuid(), os.getgid())\n"
        "for path in ('/opt/pgwork/probe', '/probe'):\n"
        "    try:\n"
        "        open(path, 'w')\n"
        "    except OSError as exc:\n"
        "        print(path, type(exc).__name__)\n"
        "    else:\n"
        "        print(path, 'WRITABLE')\n",
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    lines = probe.stdout.split("\n")
    assert lines[0] == "10001 10001"
    assert "WRITABLE" not in probe.stdout, probe.stdout


def test_image_is_small_and_has_no_build_tools(image: Image) -> None:
    size = int(image.podman("image", "inspect", "--format", "{{.Size}}", image.tag, check=True).stdout)
    print(
        f"\nimage size {size / 2**20:.0f} MiB"
        + (f", built in {image.build_seconds:.0f}s" if image.build_seconds else "")
    )
    assert size < MAX_IMAGE_MIB * 2**20, f"image is {size / 2**20:.0f} MiB"
    found = image.podman(
        "run", "--rm", "--read-only", "--entrypoint", "sh", image.tag, "-c",
        "for t in gcc cc make apt-get pg_config; do command -v $t; done; true",
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    tools = [line for line in found.stdout.split() if not line.endswith("apt-get")]
    assert tools == [], f"build tools in the runtime image: {tools}"


def test_migrate_enqueue_and_a_burst_worker_against_the_host_database(image: Image, empty_dsn: str) -> None:
    migrated = image.run("--dsn", empty_dsn, "migrate", dsn=empty_dsn)
    assert migrated.returncode == 0, migrated.stderr
    enqueued = image.run("--dsn", empty_dsn, "enqueue", JOB_TYPE, "--payload", invoice_payload(0.1), dsn=empty_dsn)
    assert enqueued.returncode == 0, enqueued.stderr
    job_id = int(enqueued.stdout.strip())
    worked = image.run(
        "--dsn", empty_dsn, "worker", "--app", "pgwork.tools.demo.app", "--burst", "--metrics-port", "0", "--id", "img",
        dsn=empty_dsn,
    )  # fmt: skip
    assert worked.returncode == 0, worked.stderr
    with psycopg.connect(empty_dsn) as conn:
        row = conn.execute(
            "select j.status, j.attempt_count, r.result->>'document' from pgwork.jobs j"
            " left join pgwork.job_results r on r.job_id = j.id where j.id = %s",
            (job_id,),
        ).fetchone()
    assert row == ("succeeded", 1, "inv-1")


def test_worker_serves_metrics_and_readyz_and_drains_on_sigterm(image: Image, empty_dsn: str) -> None:
    assert image.run("--dsn", empty_dsn, "migrate", dsn=empty_dsn).returncode == 0
    name = f"pgwork-test-{uuid.uuid4().hex[:8]}"
    port = free_port()
    started = image.podman(
        "run", "-d", "--name", name, *CONTAINER, *reach(empty_dsn), image.tag,
        "--dsn", empty_dsn, "worker", "--app", "pgwork.tools.demo.app", "--metrics-port", str(port),
        "--heartbeat", "1s", "--lease", "10s", "--grace", "30s", "--id", name,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: get(base + "/readyz")[0] == 200, 60, interval=0.1, what="/readyz answering 200")
        status, text = get(base + "/metrics")
        assert status == 200
        for name_ in ("pgwork_worker_heartbeat_age_seconds", "pgwork_claim_duration_seconds_bucket"):
            assert name_ in text
        assert f'pgwork_jobs_finished_total{{job_type="{JOB_TYPE}",outcome="succeeded"}} 0.0' in text
        enqueued = image.run("--dsn", empty_dsn, "enqueue", JOB_TYPE, "--payload", invoice_payload(3), dsn=empty_dsn)
        job_id = int(enqueued.stdout.strip())

        def status_of() -> str:
            with psycopg.connect(empty_dsn) as conn:
                row = conn.execute("select status from pgwork.jobs where id = %s", (job_id,)).fetchone()
            return str(row[0]) if row else ""

        wait_for(lambda: status_of() == "running", 30, interval=0.1, what="the job running in the container")
        # SIGTERM, as Kubernetes sends it: no new claims, the running job finishes, exit 0.
        assert image.podman("kill", "--signal", "TERM", name).returncode == 0
        wait_for(
            lambda: get(base + "/readyz")[0] != 200, 10, interval=0.1, what="/readyz going not-ready while draining"
        )
        waited = image.podman("wait", name, timeout=60)
        assert waited.stdout.strip() == "0", waited.stdout + waited.stderr
        assert status_of() == "succeeded"
        logged = image.podman("logs", name)
        logs = logged.stdout + logged.stderr
        assert "stop requested" in logs
        assert "Traceback" not in logs, logs
    finally:
        image.podman("rm", "-f", name)


# A PyTorch image stood in for by the same base with a `torch` package in its system site-packages:
# what a GPU team's CUDA/PyTorch base gives the venv with VENV_OPTIONS=--system-site-packages.
FAKE_TORCH = (
    "import os, site, pathlib; "
    "d = pathlib.Path(next(p for p in site.getsitepackages() if os.path.isdir(p))) / 'torch'; "
    "d.mkdir(); (d / '__init__.py').write_text('__version__ = \"0.0+base\"\\n')"
)


def test_pgwork_installs_into_a_pytorch_base_and_sees_its_torch(image: Image, tmp_path: Path) -> None:
    """docs/worker.md's GPU recipe: the Dockerfile's PYTHON_IMAGE and VENV_OPTIONS build arguments
    put pgwork on an existing base whose packages the handlers import. One more build, on the same
    local base as the main image (offline), so a layer cache makes it cheap."""
    build = json.loads((CACHE / "last-build.json").read_text())
    base_tag, tag = "localhost/pgwork-torch-base:test", "localhost/pgwork:torch-test"
    (tmp_path / "Containerfile").write_text(f"FROM {build['base']}\nRUN python -c {json.dumps(FAKE_TORCH)}\n")
    image.podman("build", "--quiet", "--network", "none", "--tag", base_tag, str(tmp_path), timeout=300, check=True)
    try:
        env = dict(image.env, PYTHON_IMAGE=base_tag, PGWORK_VENV_OPTIONS="--system-site-packages")
        proc = subprocess.run(
            ["bash", str(BUILD), tag], capture_output=True, text=True, env=env, timeout=1200, check=False
        )
        assert proc.returncode == 0, f"scripts/build-image.sh failed:\n{proc.stdout}\n{proc.stderr}"
        probe = image.podman(
            "run", "--rm", *CONTAINER, "--entrypoint", "python", tag, "-c",
            "import torch, pgwork, pgwork.cli; print(torch.__version__, torch.__file__, pgwork.__file__)",
        )  # fmt: skip
        assert probe.returncode == 0, probe.stderr
        version, torch_file, pgwork_file = probe.stdout.split()
        assert version == "0.0+base" and not torch_file.startswith("/opt/pgwork/"), torch_file  # the base's own
        assert pgwork_file.startswith("/opt/pgwork/"), pgwork_file
        assert image.podman("run", "--rm", *CONTAINER, tag, "--version").returncode == 0
        # The default build keeps the venv to itself: the base's packages do not leak into it.
        isolated = image.podman("run", "--rm", *CONTAINER, "--entrypoint", "python", image.tag, "-c", "import torch")
        assert isolated.returncode != 0
    finally:
        image.podman("rmi", "--force", tag, base_tag)
