"""Choosing the biLM's compute precision: ``float32``, ``bfloat16`` or ``auto``.

bfloat16 only pays where the hardware multiplies it natively: on CPUs without bf16 matrix units
(AVX2, or AVX-512 without ``avx512_bf16``/``amx_bf16``) torch emulates it and the biLM runs several
times *slower* than in float32 (docs/benchmarks.md, section "Findings"). ``auto`` picks bfloat16 only
where it is native; an explicit ``bfloat16`` elsewhere is honoured but warned about, once.
"""

from __future__ import annotations

import platform
import warnings
from pathlib import Path
from typing import FrozenSet, Optional, Tuple, Union

import torch

from ..errors import ElmoConfigError

CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})  # x86-64 (/proc/cpuinfo)
ARM_BF16_FLAGS = frozenset({"bf16"})  # aarch64 (/proc/cpuinfo "Features")
_warned: set = set()


def _cpuinfo_field(keys: Tuple[str, ...], cpuinfo: Union[str, Path]) -> Optional[str]:
    """The value of the first ``cpuinfo`` line whose key is one of ``keys`` (None: none, or unreadable)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in keys:
            return value.strip()
    return None


def cpu_flags(cpuinfo: Union[str, Path] = "/proc/cpuinfo") -> FrozenSet[str]:
    """The CPU feature flags listed in ``cpuinfo`` (empty when it cannot be read, e.g. not Linux)."""
    return frozenset((_cpuinfo_field(("flags", "Features"), cpuinfo) or "").split())


def cpu_vendor(cpuinfo: Union[str, Path] = "/proc/cpuinfo") -> str:
    """The CPU's vendor id in ``cpuinfo`` (``GenuineIntel``, ``AuthenticAMD``...; "" when unknown)."""
    return _cpuinfo_field(("vendor_id",), cpuinfo) or ""


def cpu_model(cpuinfo: Union[str, Path] = "/proc/cpuinfo") -> str:
    """The CPU's model name in ``cpuinfo`` ("" when unknown)."""
    return _cpuinfo_field(("model name",), cpuinfo) or ""


def native_bf16_reason(
    device: Union[str, torch.device] = "cpu", flags: Optional[FrozenSet[str]] = None
) -> Optional[str]:
    """``None`` when ``device`` runs bfloat16 matrix products natively, else why not (one phrase).

    device: the torch device the biLM runs on. flags: the CPU flags (default: :func:`cpu_flags`).
    """
    device = torch.device(device)
    if device.type == "cuda":
        return None if torch.cuda.is_bf16_supported() else f"the GPU {device} has no bfloat16 support"
    flags = cpu_flags() if flags is None else flags
    if flags & (CPU_BF16_FLAGS | ARM_BF16_FLAGS):
        return None
    return (
        f"this CPU ({platform.machine()}) has no native bfloat16 units (none of the flags "
        f"{', '.join(sorted(CPU_BF16_FLAGS | ARM_BF16_FLAGS))}): bfloat16 is emulated and slower than float32"
    )


def resolve_compute_dtype(
    name: str, device: Union[str, torch.device] = "cpu", flags: Optional[FrozenSet[str]] = None
) -> torch.dtype:
    """The torch dtype for the setting ``name`` (``float32``, ``bfloat16`` or ``auto``) on ``device``.

    ``auto``: bfloat16 where native (see :func:`native_bf16_reason`), float32 elsewhere. An explicit
    ``bfloat16`` without native support is kept, with a warning (once per reason).
    flags: the CPU flags (default: read from ``/proc/cpuinfo``).
    """
    if name not in ("float32", "bfloat16", "auto"):
        raise ElmoConfigError(f"compute dtype must be 'float32' (exact), 'bfloat16' or 'auto', got {name!r}")
    if name == "float32":
        return torch.float32
    reason = native_bf16_reason(device, flags)
    if name == "auto":
        return torch.float32 if reason else torch.bfloat16
    if reason and reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"compute_dtype 'bfloat16' requested, but {reason}; use 'auto' or 'float32'", stacklevel=2)
    return torch.bfloat16
