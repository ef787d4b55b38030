"""The lab's inference models: a simulated one costing `a + b*n` seconds for a batch of n (a
device call: it sleeps, releasing the interpreter lock as a CUDA call does), or, with PyTorch and
CUDA, a 12-layer encoder of BERT-base shape (random weights, bf16, 256 tokens) as on the GPU host.

Chosen by PGWORK_LAB_MODEL: "sim:A,B" (seconds; default "sim:0.004,0.0001", near the encoder's
batch-1 and batch-128 costs on an H200) or "torch". The numpy CPU job of the cpu-bound
experiment is here too (`cpu_job`), so the bare process and the handler run the same code.
"""

from __future__ import annotations

import importlib
import os
import time
from dataclasses import dataclass
from typing import Any, Protocol

DEFAULT_SIM = "sim:0.004,0.0001"


class Model(Protocol):
    name: str

    def infer(self, n: int) -> float: ...


@dataclass
class SimModel:
    a: float
    b: float
    name: str = "sim"

    def infer(self, n: int) -> float:
        time.sleep(self.a + self.b * n)
        return float(n)


def cuda_problem() -> str | None:
    """Why the torch model cannot run here, or None."""
    try:
        torch = importlib.import_module("torch")
    except ImportError as exc:
        return f"PyTorch is not importable ({exc})"
    if not torch.cuda.is_available():
        return f"PyTorch {torch.__version__} sees no CUDA device"
    return None


class TorchModel:
    name = "torch"

    def __init__(self) -> None:
        torch: Any = importlib.import_module("torch")  # optional: only on a GPU host

        torch.backends.cuda.matmul.allow_tf32 = True
        self._torch = torch
        d, layers = 768, 12
        layer = torch.nn.TransformerEncoderLayer(d_model=d, nhead=12, dim_feedforward=3072, batch_first=True)
        encoder = torch.nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
        self._model = encoder.cuda().to(torch.bfloat16).eval()
        self._d = d
        self.infer(1)
        self.device = torch.cuda.get_device_name(0)

    def infer(self, n: int) -> float:
        torch = self._torch
        x = torch.randn(n, 256, self._d, device="cuda", dtype=torch.bfloat16)
        with torch.inference_mode():
            y = self._model(x).mean(dim=1)
        return float(y.float().norm())  # a sync: the call is done when the GPU is


def load(spec: str | None = None) -> Model:
    spec = spec or os.environ.get("PGWORK_LAB_MODEL", DEFAULT_SIM)
    if spec == "torch":
        return TorchModel()
    kind, _, costs = spec.partition(":")
    try:
        a, b = (float(x) for x in costs.split(","))
    except ValueError:
        raise ValueError(f"PGWORK_LAB_MODEL={spec!r}: write torch, or sim:A,B (seconds)") from None
    if kind != "sim":
        raise ValueError(f"PGWORK_LAB_MODEL={spec!r}: write torch, or sim:A,B (seconds)")
    return SimModel(a, b)


def cpu_job(seed: int, n: int, rounds: int) -> dict[str, Any]:
    """CPU-bound numpy work (matrix products and tanh, one BLAS thread by the environment): its
    wall and CPU seconds and the page faults it took, for telling the worker's overhead apart
    from the job's own."""
    import resource

    import numpy as np

    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t, c = time.perf_counter(), time.thread_time()
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    b = rng.standard_normal((n, n)) / n**0.5
    for _ in range(rounds):
        a = np.tanh(a @ b)
    return {
        "wall": time.perf_counter() - t,
        "cpu": time.thread_time() - c,
        "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before,
        "sum": float(a.sum()),
    }
