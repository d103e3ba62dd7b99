"""Which PyTorch device a sidecar job runs on, and which precision that device supports.

Decided once here, so that the sidecar, teacher fine-tuning and GPU embedding refuse the same
way: ``auto`` is the first GPU when there is one, else the CPU; a GPU asked for by name must
exist (50055), never silently fall back to a CPU that would take hours.
"""

from __future__ import annotations

import os

import torch

from sqlheads.errors import DeviceUnavailableError, InvalidParameterError

DEVICES = ("auto", "cpu", "cuda", "cuda:N")


def resolve_device(requested: str = "auto") -> torch.device:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N`` as a device this machine has."""
    name = (requested or "auto").strip().lower()
    # Under torchrun each process takes its own GPU (LOCAL_RANK), never all of them GPU 0.
    local = os.environ.get("LOCAL_RANK", "0")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        index = name.partition(":")[2] or local
        if not index.isdigit():
            raise InvalidParameterError(
                f"device {requested!r} is not a device name: pass one of {', '.join(DEVICES)}"
            )
        available = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if int(index) >= available:
            raise DeviceUnavailableError(
                f"device {requested!r} was asked for but this machine has "
                f"{available} CUDA GPU(s) (torch {torch.__version__}): run the sidecar where a "
                "GPU is visible (docker compose's GPU reservation), or pass --device cpu"
            )
        return torch.device(f"cuda:{index}")
    raise InvalidParameterError(
        f"device {requested!r} is not a device name: pass one of {', '.join(DEVICES)}"
    )


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host batch on ``device``; on CUDA through page-locked memory, so the copy runs
    asynchronously and overlaps the work already queued (pageable copies showed in the
    H100 profile)."""
    if device.type == "cuda":
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


def supports_bf16(device: torch.device) -> bool:
    """bf16 autocast only where the GPU computes it natively (Ampere and later)."""
    return device.type == "cuda" and torch.cuda.is_bf16_supported()
