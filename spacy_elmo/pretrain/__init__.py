"""Pretrain or domain-adapt a biLM on raw text: streaming corpora, the softmax vocabulary,
stateful truncated backprop, exact checkpoints, DistributedDataParallel, export."""

from .checkpoint import load_checkpoint
from .config import PretrainConfig
from .export import export
from .trainer import TrainResult, train

__all__ = ["PretrainConfig", "TrainResult", "export", "load_checkpoint", "train"]
