"""The worker pod's writable places: the scratch volume at /tmp (`spec.worker.scratch`), a model
cache (`spec.worker.modelCache`, with HF_HOME and TORCH_HOME pointed into it) and shared memory for
PyTorch data loaders (`spec.worker.shm`, at /dev/shm). Parsed with the CRD's rules; rendered by
render.py. The image's root filesystem is read-only, so these are the only places a handler writes.

Left out, each renders as before the field existed: /tmp a 64 MiB emptyDir, no cache, no /dev/shm
volume (the runtime's 64 MiB default), so an upgrade rolls no worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pgwork.operator import kubenames
from pgwork.operator.fields import Reader, SpecError

# A Kubernetes quantity as emptyDir.sizeLimit takes one, whole numbers only (`64Mi`, `20Gi`, `1G`).
QUANTITY_PATTERN = r"[1-9][0-9]*(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?"
QUANTITY_MAX = 20
SCRATCH_DEFAULT_SIZE = "64Mi"
MEDIA = ("", "Memory")
SCRATCH = "tmp"
MODEL_CACHE = "model-cache"
SHM = "dshm"
SCRATCH_PATH = "/tmp"  # noqa: S108 (a path inside the pod)
SHM_PATH = "/dev/shm"  # noqa: S108 (a path inside the pod)
MODEL_CACHE_PATH = "/models"
# Where the libraries look for downloaded models, under the cache's mount path.
CACHE_ENV = (("HF_HOME", "huggingface"), ("TORCH_HOME", "torch"))
# Absolute, no trailing or doubled slash, no `.` or `..` part: the CRD's pattern.
_MOUNT_PATH = r"(/[A-Za-z0-9_-][A-Za-z0-9._-]*)+"
# /tmp is scratch; the image, and the kernel's and runtime's own places, are not a cache's.
_RESERVED_PATHS = (SCRATCH_PATH, "/opt/pgwork", "/dev", "/proc", "/sys")


@dataclass(frozen=True)
class ModelCache:
    mount_path: str = MODEL_CACHE_PATH
    claim_name: str | None = None  # a PersistentVolumeClaim; None: an emptyDir per pod
    read_only: bool = False
    size_limit: str | None = None  # the emptyDir's sizeLimit


@dataclass(frozen=True)
class WorkerVolumes:
    scratch_size: str = SCRATCH_DEFAULT_SIZE
    scratch_medium: str = ""
    model_cache: ModelCache | None = None
    shm_size: str | None = None

    def scratch_volume(self) -> dict[str, Any]:
        empty_dir: dict[str, Any] = {"sizeLimit": self.scratch_size}
        if self.scratch_medium:
            empty_dir["medium"] = self.scratch_medium
        return {"name": SCRATCH, "emptyDir": empty_dir}

    def worker_volumes(self) -> list[dict[str, Any]]:
        """The worker pod's volumes beyond scratch."""
        out: list[dict[str, Any]] = []
        cache = self.model_cache
        if cache is not None:
            if cache.claim_name is not None:
                claim: dict[str, Any] = {"claimName": cache.claim_name}
                if cache.read_only:
                    claim["readOnly"] = True
                out.append({"name": MODEL_CACHE, "persistentVolumeClaim": claim})
            else:
                out.append(
                    {"name": MODEL_CACHE, "emptyDir": {"sizeLimit": cache.size_limit} if cache.size_limit else {}}
                )
        if self.shm_size is not None:
            out.append({"name": SHM, "emptyDir": {"medium": "Memory", "sizeLimit": self.shm_size}})
        return out

    def worker_mounts(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self.model_cache is not None:
            mount: dict[str, Any] = {"name": MODEL_CACHE, "mountPath": self.model_cache.mount_path}
            if self.model_cache.read_only:
                mount["readOnly"] = True
            out.append(mount)
        if self.shm_size is not None:
            out.append({"name": SHM, "mountPath": SHM_PATH})
        return out

    def worker_env(self) -> list[dict[str, str]]:
        if self.model_cache is None:
            return []
        base = self.model_cache.mount_path
        return [{"name": name, "value": f"{base}/{sub}"} for name, sub in CACHE_ENV]

    def mount_paths(self) -> set[str]:
        return {SCRATCH_PATH, *(m["mountPath"] for m in self.worker_mounts())}


def _quantity(r: Reader, name: str, fix: str, *, required: bool = False) -> str | None:
    return r.matching(name, QUANTITY_PATTERN, QUANTITY_MAX, fix, required=required)


def _only(r: Reader, allowed: set[str]) -> None:
    unknown = sorted(set(r.raw) - allowed)
    if unknown:
        raise SpecError(r.field(unknown[0]), "is not a field here", f"give only {', '.join(sorted(allowed))}")


def parse_volumes(w: Reader) -> WorkerVolumes:
    scratch = Reader(w.raw.get("scratch"), w.field("scratch"), {"sizeLimit": SCRATCH_DEFAULT_SIZE, "medium": ""})
    _only(scratch, {"sizeLimit", "medium"})
    size = _quantity(scratch, "sizeLimit", "a size for /tmp, e.g. 10Gi (a whole number and a unit: Mi, Gi, ...)")
    medium = scratch.one_of(
        "medium", MEDIA, 'leave it out for the node\'s disk, or "Memory" for a tmpfs (counted against the memory limit)'
    )
    cache = None
    if w.raw.get("modelCache") is not None:
        c = Reader(w.raw.get("modelCache"), w.field("modelCache"), {"mountPath": MODEL_CACHE_PATH, "readOnly": False})
        _only(c, {"mountPath", "claimName", "readOnly", "sizeLimit"})
        path = c.matching(
            "mountPath",
            _MOUNT_PATH,
            200,
            "an absolute path such as /models (letters, digits and . _ -; no trailing /, no . or .. parts)",
        )
        assert path is not None
        if path in _RESERVED_PATHS or path.startswith(("/dev/", "/proc/", "/sys/", "/opt/pgwork/")):
            raise SpecError(c.field("mountPath"), f"{path!r} is taken", "mount the cache elsewhere, e.g. /models")
        claim = c.string("claimName")
        c.checked(
            "claimName",
            kubenames.is_dns1123_subdomain(claim),
            claim,
            "a PersistentVolumeClaim in the JobQueue's namespace: lower-case letters, digits, '-' and '.'",
        )
        cache_size = _quantity(c, "sizeLimit", "a size for the per-pod cache, e.g. 20Gi")
        if claim is not None and cache_size is not None:
            raise SpecError(
                c.field("sizeLimit"),
                "sizes the per-pod emptyDir, not a PersistentVolumeClaim",
                "size the claim itself, and remove sizeLimit or claimName",
            )
        read_only = c.boolean("readOnly")
        if read_only and claim is None:
            raise SpecError(
                c.field("readOnly"),
                "a per-pod emptyDir starts empty: read-only it could never be filled",
                "name a pre-filled PersistentVolumeClaim in claimName, or remove readOnly",
            )
        cache = ModelCache(path, claim, read_only, cache_size)
    shm = None
    if w.raw.get("shm") is not None:
        s = Reader(w.raw.get("shm"), w.field("shm"), {})
        _only(s, {"sizeLimit"})
        shm = _quantity(
            s,
            "sizeLimit",
            "a size for /dev/shm, e.g. 2Gi (memory-backed: it counts against the worker's memory limit)",
            required=True,
        )
    assert size is not None
    return WorkerVolumes(size, medium, cache, shm)


def check_template_clashes(volumes: WorkerVolumes, template: Mapping[str, Any] | None, field: str) -> None:
    """A podTemplate volume or worker mount that would collide with one the typed fields render."""
    spec = (template or {}).get("spec") or {}
    taken = {v["name"] for v in volumes.worker_volumes()}
    for i, volume in enumerate(spec.get("volumes") or []):
        if isinstance(volume, Mapping) and volume.get("name") in taken:
            raise SpecError(
                f"{field}.spec.volumes[{i}].name",
                f"{volume['name']} is rendered from spec.worker.{_owner(volume['name'])}",
                "give the volume another name, or leave the typed field out",
            )
    paths = volumes.mount_paths()
    for i, container in enumerate(spec.get("containers") or []):
        if not isinstance(container, Mapping) or container.get("name") != "worker":
            continue
        for j, mount in enumerate(container.get("volumeMounts") or []):
            if isinstance(mount, Mapping) and str(mount.get("mountPath", "")).rstrip("/") in paths:
                raise SpecError(
                    f"{field}.spec.containers[{i}].volumeMounts[{j}].mountPath",
                    f"{mount['mountPath']} is already mounted by the operator",
                    "size /tmp with spec.worker.scratch, /dev/shm with spec.worker.shm and the model cache with "
                    "spec.worker.modelCache, or mount elsewhere",
                )


def _owner(volume: str) -> str:
    return "modelCache" if volume == MODEL_CACHE else "shm"
