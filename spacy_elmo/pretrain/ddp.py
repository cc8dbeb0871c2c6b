"""Process-group plumbing for `torchrun`: one process per device, rank 0 writes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, List, Optional

import torch
import torch.distributed as dist

from ..errors import ElmoError, Errors


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
    this process's device (`auto`, `cpu`, `cuda` or `cuda:N`; under torchrun each process
    takes the GPU of its local rank): NCCL on GPUs, Gloo on CPU."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    asked = None if device == "auto" else torch.device(device)
    use_cuda = torch.cuda.is_available() if asked is None else asked.type == "cuda"
    if use_cuda:
        dev = torch.device("cuda", cuda_index(asked, local_rank, world_size))
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo", rank=rank,
                                world_size=world_size)
    return DistContext(rank, world_size, dev)


def cuda_index(asked: Optional[torch.device], local_rank: int, world_size: int) -> int:
    """The GPU of this process (`asked`: None for `auto`): its local rank under torchrun,
    else the one asked for (the current one for plain `cuda`); checked against the GPUs
    torch sees."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if world_size > 1:
        index = local_rank
    elif asked is not None and asked.index is not None:
        index = asked.index
    else:
        index = torch.cuda.current_device() if count else 0
    if index >= count:
        raise ElmoError(Errors.E126.format(device="auto" if asked is None else str(asked),
                                           index=index, count=count))
    return index


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

