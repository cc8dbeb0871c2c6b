"""Pretrain or domain-adapt a biLM on raw text: streaming corpora, the softmax vocabulary,
stateful truncated backprop, exact checkpoints, DistributedDataParallel; exports and
snapshots in the submodule `export`."""

from .checkpoint import load_checkpoint
from .config import PretrainConfig
from .trainer import TrainResult, train

__all__ = ["PretrainConfig", "TrainResult", "load_checkpoint", "train"]
