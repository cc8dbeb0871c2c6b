"""Process-group plumbing for `torchrun`: one process per device, rank 0 writes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, List

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistContext:
    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def setup(device: str = "auto") -> DistContext:
    """Join the process group that torchrun describes in the environment (if any) and pick
    this process's device: NCCL on GPUs, Gloo on CPU."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    use_cuda = torch.cuda.is_available() if device == "auto" else device.startswith("cuda")
    if use_cuda:
        dev = torch.device("cuda", local_rank if world_size > 1 else torch.cuda.current_device())
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo", rank=rank,
                                world_size=world_size)
    return DistContext(rank, world_size, dev)


def teardown(ctx: DistContext) -> None:
    if ctx.distributed and dist.is_initialized():
        dist.destroy_process_group()


def any_flag(ctx: DistContext, *flags: bool) -> List[bool]:
    """Each flag OR-ed over all processes, so that all of them act together."""
    if not ctx.distributed:
        return list(flags)
    t = torch.tensor([float(f) for f in flags], device=ctx.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [bool(v) for v in t.tolist()]


def gather(ctx: DistContext, obj: Any) -> List[Any]:
    """Every process's object, in rank order (on every process)."""
    if not ctx.distributed:
        return [obj]
    out: List[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def barrier(ctx: DistContext) -> None:
    if ctx.distributed:
        dist.barrier()

