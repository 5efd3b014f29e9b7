"""Devices and data-parallel training with ``torch.distributed`` (launched by ``torchrun``).

One process per device. Every rank builds the same epoch plan (it depends only on the seed and the
epoch), so a global batch is the same list of examples everywhere; rank ``r`` trains on every
``world_size``-th example of it (examples are sorted by length inside a batch, so the shares are
balanced). ``DistributedDataParallel`` averages the ranks' gradients; each rank scales its loss sum
by ``world_size / global predictions``, so the averaged gradient is the one of the token-weighted
mean loss over the global batch, as in a single process.
"""

from __future__ import annotations

import datetime
import gc
import os
from dataclasses import dataclass
from typing import List, Sequence, TypeVar

import torch
import torch.distributed as dist

from ..errors import ElmoInputError

T = TypeVar("T")
TIMEOUT = datetime.timedelta(minutes=30)


@dataclass(frozen=True)
class Cluster:
    """Where this process runs.

    rank: this process's index among ``world_size`` processes (0 writes the files).
    device: the torch device this process computes on.
    """

    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, items: Sequence[T]) -> List[T]:
        """This rank's share of ``items``: every ``world_size``-th one, starting at ``rank``."""
        return list(items[self.rank :: self.world_size])

    def sum(self, values: Sequence[float]) -> List[float]:
        """``values`` summed over all ranks (float64; unchanged in a single process)."""
        if not self.distributed:
            return [float(v) for v in values]
        t = torch.tensor(values, dtype=torch.float64, device=self._collective_device)
        dist.all_reduce(t)
        return t.tolist()

    def any(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is true on at least one (a common stop decision)."""
        return self.sum([float(flag)])[0] > 0

    @property
    def _collective_device(self) -> torch.device:
        return self.device if self.device.type == "cuda" else torch.device("cpu")


def parse_device(text: str) -> torch.device:
    """``cpu``, ``cuda`` or ``cuda:N`` as a torch device; an :class:`ElmoInputError` otherwise or when
    CUDA (or device N) is not available."""
    try:
        device = torch.device(text)
    except RuntimeError:
        raise ElmoInputError(f"--device must be cpu, cuda or cuda:N, got {text!r}") from None
    if device.type not in ("cpu", "cuda"):
        raise ElmoInputError(f"--device must be cpu, cuda or cuda:N, got {text!r}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ElmoInputError(f"--device {text}: CUDA is not available on this machine (torch {torch.__version__})")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ElmoInputError(f"--device {text}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


def launched_by_torchrun() -> bool:
    """True when the environment of ``torchrun`` (``RANK``, ``WORLD_SIZE``, ...) is set."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"))


def start(device: str) -> Cluster:
    """Join the process group when launched by ``torchrun`` (gloo on CPU, nccl on CUDA) and pick this
    rank's device: ``cuda`` means ``cuda:LOCAL_RANK`` under torchrun.

    device: the ``--device`` value (``cpu``, ``cuda`` or ``cuda:N``).
    """
    chosen = parse_device(device)
    if not launched_by_torchrun() or int(os.environ["WORLD_SIZE"]) == 1:
        if chosen.type == "cuda" and chosen.index is None:
            chosen = torch.device("cuda", 0)
        return Cluster(device=chosen)
    if chosen.type == "cuda":
        if chosen.index is not None:
            raise ElmoInputError(
                f"--device {device}: under torchrun give --device cuda (each rank uses cuda:LOCAL_RANK)"
            )
        chosen = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(chosen)
    dist.init_process_group("nccl" if chosen.type == "cuda" else "gloo", timeout=TIMEOUT)
    return Cluster(rank=dist.get_rank(), world_size=dist.get_world_size(), device=chosen)


def stop(cluster: Cluster) -> None:
    """Leave the process group (after a last barrier, so that no rank exits while others still talk).

    Unreachable objects are collected first, so that a DDP model left in a reference cycle frees its
    reducer and the gloo work it holds while the group still exists; freed at interpreter exit, after
    the group is gone, they now and then made a rank abort (``terminate called without an active
    exception``) on busy cores."""
    if cluster.distributed and dist.is_initialized():
        gc.collect()
        dist.barrier()
        dist.destroy_process_group()
