"""The pretraining loop: stateful truncated backprop over per-row sentence streams."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from ..bilm.chars import CharIds
from ..bilm.hardware import describe_device
from ..bilm.io.sources import locate
from ..bilm.io.weights import load_bilm
from ..bilm.lm import BiLanguageModel
from ..bilm.lstm import LSTMState
from ..bilm.model import BiLM
from ..bilm.precision import check_precision
from ..errors import ElmoError, Errors, Warnings, first_line, warn
from ..files import names
from ..files.atomic import make_directory
from ..files.json_io import write_json
from . import ddp
from .batches import BatchMaker, RowBuffers, TrainStreams, dev_batches
from .checkpoint import load_checkpoint, model_from_checkpoint, save_checkpoint
from .config import PretrainConfig
from .corpus import SentenceSource, SourceState, TextSettings
from .export import Softmax, check_finite, export_model, read_softmax, write_snapshot
from .memory import check_memory
from .optim import make_optimizer
from .perplexity import evaluate_lm, read_sentences
from .plot import draw_curves
from .rundir import (
    RunLock,
    check_inputs,
    check_optimizer,
    check_resume,
    check_resume_vocab,
    check_run_dir,
    clear_run,
    dev_files,
    frozen_settings,
    recorded,
    train_files,
    truncate_metrics,
    warn_inside_corpus,
)
from .stopping import StopRequested, StopSignal
from .vocab import Vocab, check_vocab, choose_vocab


@dataclass
class TrainResult:
    step: int
    model: BiLanguageModel
    stopped: bool
    dev: Optional[Dict[str, float]]
    signum: Optional[int] = None  # the signal that stopped it (None: finished, or another rank's)
    trained: int = 0  # steps this process trained (0: a resume already at max_steps)


def lr_factor(config: PretrainConfig, step: int) -> float:
    """The learning-rate multiplier at a step (warmup, then the schedule)."""
    warm = config.warmup_steps
    if warm and step < warm:
        return (step + 1) / warm
    if config.lr_schedule == "linear":
        return max(0.0, 1.0 - (step - warm) / max(config.max_steps - warm, 1))
    if config.lr_schedule == "cosine":
        progress = min(1.0, (step - warm) / max(config.max_steps - warm, 1))
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    if config.lr_schedule == "inverse_sqrt":
        return math.sqrt(max(warm, 1) / max(step + 1, 1))
    return 1.0


SCHEDULE_KEYS = ("max_steps", "warmup_steps", "lr_schedule")


def warn_schedule_change(before: Optional[PretrainConfig], after: PretrainConfig,
                         step: int) -> None:
    """W019 when a resume changes a setting the learning-rate schedule depends on
    (max_steps, warmup_steps, lr_schedule) so that the rate from `step` on differs."""
    if before is None:
        return
    changed = [k for k in SCHEDULE_KEYS if getattr(before, k) != getattr(after, k)]
    end = max(step + 1, min(before.max_steps, after.max_steps))
    ahead = range(step, end, max(1, (end - step) // 64))
    if not changed or all(math.isclose(lr_factor(before, s), lr_factor(after, s))
                          for s in ahead):
        return
    warn(Warnings.W019.format(
        changed=", ".join(f"{k} {getattr(before, k)} -> {getattr(after, k)}" for k in changed),
        schedule=after.lr_schedule, step=step, before=before.lr * lr_factor(before, step),
        after=after.lr * lr_factor(after, step),
        kept=", ".join(f"--{k.replace('_', '-')} {getattr(before, k)}" for k in changed)),
        stacklevel=2)


def init_softmax_from_encoder(model: BiLanguageModel, vocab: Vocab) -> None:
    """Start the softmax of a published biLM (which ships none) from the token encoder's
    vector of each vocabulary word, scaled to unit mean norm; biases at zero."""
    char_ids = CharIds(model.bilm.options.max_characters_per_token)
    device = model.softmax.weight.device
    with torch.no_grad():
        chunks = []
        for start in range(0, len(vocab), 4096):
            ids = np.stack([char_ids.token(w) for w in vocab.words[start : start + 4096]])
            chunks.append(model.bilm.encoder(torch.from_numpy(ids).to(device)))
        vectors = torch.cat(chunks)
        vectors = vectors / vectors.norm(dim=1).mean().clamp(min=1e-6)
        model.softmax.weight.copy_(vectors)
        model.softmax.bias.zero_()


def init_softmax(model: BiLanguageModel, vocab: Vocab, exported: Optional[Softmax]) -> None:
    """The softmax of an --init-weights model: the export's own rows for every word of
    `vocab` it has (all of them when `vocab` is the export's), the token encoder's vectors
    for the rest (all of them for a published biLM)."""
    init_softmax_from_encoder(model, vocab)
    if exported is None:
        return
    index = {word: i for i, word in enumerate(exported.vocab.words)}
    pairs = [(i, index[w]) for i, w in enumerate(vocab.words) if w in index]
    if pairs:
        mine, theirs = (torch.tensor(ids) for ids in zip(*pairs, strict=True))
        weight = model.softmax.weight
        with torch.no_grad():
            weight[mine] = torch.from_numpy(exported.weight).to(weight)[theirs]
            model.softmax.bias[mine] = torch.from_numpy(exported.bias).to(weight)[theirs]


def exported_softmax(config: PretrainConfig, bilm: BiLM) -> Optional[Softmax]:
    """The softmax and vocabulary beside the --init-weights biLM, when it is an export of
    this project (a published biLM has none)."""
    if config.init_weights is None:
        return None
    files = locate(config.init_weights, config.init_options)  # found again: a cache hit
    return read_softmax(files.weights, bilm.options.projection_dim)


def update(config: PretrainConfig, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
           loss: torch.Tensor, lr: float) -> None:
    """One step's update: the gradient of the window's mean loss (bilm-tf's: summed over the
    window's steps, averaged over rows, with `sum_over_steps`), clipped to `clip_norm`, then
    the optimizer's step at `lr`."""
    optimizer.zero_grad(set_to_none=True)
    (loss * config.window if config.sum_over_steps else loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()


def reset_rows(state: LSTMState, probability: float) -> LSTMState:
    """Zero each row's carried state (both directions, all layers) with `probability`,
    drawn from torch's random stream (part of a checkpoint, so resuming stays exact).

    Without resets a row's state runs on from step 0, and a biLM trained with large steps
    (Adam) can come to depend on cells that sit at the clip value for thousands of steps:
    measured on lm_en with Adam 1e-3 at step 1,000, its full-softmax perplexity on training
    text was 271 forward / 265 backward with the carried state and 4,902 / 2,072 from a zero
    state, which is how the component (every sentence from zero) and dev evaluation start."""
    keep = (torch.rand(state.h.shape[2]) >= probability).to(state.h.device)
    mask = keep.to(state.h.dtype)[None, None, :, None]
    return LSTMState(state.h * mask, state.c * mask)


def make_bilm(config: PretrainConfig) -> BiLM:
    """A fresh BiLM of the configured shape, or the --init-weights one (options checked)."""
    if config.init_weights is None:
        return BiLM(config.bilm_options())
    bilm = load_bilm(config.init_weights, config.init_options).train()
    if bilm.dictionary is not None:
        raise ElmoError(Errors.E042.format(path=config.init_weights))
    config.check_init_shape(bilm.options)  # options and preset: the weights' shape
    return bilm


def read_dev(config: PretrainConfig, settings: TextSettings, vocab: Vocab) -> List[List[str]]:
    """Dev sentences up to `dev_max_tokens`."""
    return read_sentences(dev_files(config), settings, vocab, config.dev_max_tokens)


@dataclass
class Position:
    """Where a run stands: its counters, the optimizer's state, and this process's data
    streams and LSTM state. A fresh start is at the beginning of everything."""

    step: int = 0
    tokens: int = 0
    elapsed: float = 0.0
    cpu_elapsed: float = 0.0  # process CPU time (all threads) of the training steps
    optimizer: Optional[Dict[str, Any]] = None
    source: Optional[SourceState] = None
    buffers: Optional[List[RowBuffers]] = None
    lstm: Optional[LSTMState] = None
    # what a stop left undone at `step`: "dev" (its evaluation), "snapshot"
    pending: Tuple[str, ...] = ()


class Trainer:
    """One process's share of a (possibly distributed) pretraining run: made by `start` (a
    new run) or `resume` (from the run's checkpoint), which differ only in where the model,
    the vocabulary, the position and the random state come from."""

    @classmethod
    def start(cls, config: PretrainConfig, ctx: ddp.DistContext, *, overwrite: bool,
              progress: bool, lock: Optional[RunLock] = None) -> Trainer:
        """A new run in `config.output` (replacing one there only with `overwrite`): the
        biLM fresh or from --init-weights, the vocabulary given or counted. Everything is
        read and checked before rank 0 clears the directory, so a start that fails leaves
        what was there. `lock` (rank 0's) is taken as soon as the directory is known to
        be usable, and again after rank 0 creates it."""
        out = Path(config.output)
        check_run_dir(out, resume=False, overwrite=overwrite)
        if lock is not None:
            lock.take()  # refuse a second writer before any work
        check_inputs(config, out)
        torch.manual_seed(config.seed)
        bilm = make_bilm(config)
        exported = exported_softmax(config, bilm)
        settings = config.text_settings()
        vocab, dev = None, None
        if ctx.is_main:
            vocab = choose_vocab(config, train_files(config), settings,
                                 None if exported is None else exported.vocab)
            check_vocab(config, vocab)
            if config.dev:
                dev = read_dev(config, settings, vocab)  # its errors, before anything is cleared
        ddp.barrier(ctx)  # every rank checked the directory before rank 0 clears it
        if vocab is not None:  # rank 0
            make_directory(out)
            if lock is not None:
                lock.take()
                # another run may have finished here since the first check
                check_run_dir(out, resume=False, overwrite=overwrite)
            clear_run(out)
            vocab.to_file(out / names.VOCAB_NAME)
        ddp.barrier(ctx)
        vocab = vocab if vocab is not None else Vocab.from_file(out / names.VOCAB_NAME)
        model = config.language_model(bilm, len(vocab))
        if config.init_weights is not None:
            init_softmax(model, vocab, exported)
        torch.manual_seed(config.seed * 7919 + 1 + ctx.rank)
        return cls(config, ctx, model, vocab, Position(), progress=progress, dev=dev)

    @classmethod
    def resume(cls, config: PretrainConfig, ctx: ddp.DistContext, *, progress: bool,
               lock: Optional[RunLock] = None) -> Trainer:
        """The run in `config.output`, continued exactly where its checkpoint left it; the
        settings that fix the model and the data must be the checkpoint's. `lock`: rank
        0's, taken before the checkpoint is read."""
        out = Path(config.output)
        check_run_dir(out, resume=True, overwrite=False)
        if lock is not None:
            lock.take()
        saved = load_checkpoint(out / names.CHECKPOINT_NAME)
        config.check_resume_step(saved["step"])  # before anything is written
        ddp.barrier(ctx)
        if saved["world_size"] != ctx.world_size:
            raise ElmoError(Errors.E110.format(found=saved["world_size"], given=ctx.world_size))
        model = model_from_checkpoint(saved, config)
        options = model.bilm.options.to_json_dict()
        asked = options if config.init_weights else config.bilm_options().to_json_dict()
        check_resume(saved["frozen"], frozen_settings(config, asked), out, train_files(config))
        check_resume_vocab(config, saved["vocab"], out)
        check_optimizer(saved["optimizer"], config.optimizer, out)
        mine = saved["ranks"][ctx.rank]
        position = Position(
            step=saved["step"], tokens=saved["tokens"], elapsed=saved["elapsed"],
            cpu_elapsed=saved["cpu_elapsed"], optimizer=saved["optimizer"],
            source=SourceState(**mine["source"]),
            buffers=[RowBuffers(fwd, bwd) for fwd, bwd in mine["buffers"]],
            lstm=LSTMState(mine["h"].to(ctx.device), mine["c"].to(ctx.device)),
            pending=tuple(saved.get("pending", ())))
        torch.set_rng_state(mine["rng"])
        if ctx.device.type == "cuda" and mine["cuda_rng"] is not None:
            torch.cuda.set_rng_state(mine["cuda_rng"], ctx.device)
        if ctx.is_main:
            make_directory(out)
            truncate_metrics(out / names.METRICS_NAME, position.step)
            warn_schedule_change(recorded(out), config, position.step)
        return cls(config, ctx, model, Vocab(saved["vocab"]), position, progress=progress)

    def __init__(self, config: PretrainConfig, ctx: ddp.DistContext, model: BiLanguageModel,
                 vocab: Vocab, position: Position, *, progress: bool,
                 dev: Optional[List[List[str]]] = None) -> None:
        """Wire a model and vocabulary to the training streams from `position`; use
        `start` or `resume`."""
        self.config = config
        self.ctx = ctx
        self.progress = progress
        self.out = Path(config.output)
        self.vocab = vocab
        self.settings = config.text_settings()
        self.files = train_files(config)
        bilm = model.bilm
        self.options = bilm.options.to_json_dict()
        self.frozen = frozen_settings(config, self.options)
        check_vocab(config, vocab)
        bilm.lstm.set_fused_backward(config.lstm_backward == "fused")
        if config.optimizer == "adam" and ctx.is_main:
            warn(Warnings.W013, stacklevel=2)
        self.model = model.to(ctx.device).train()
        # bf16 products over the fp32 master weights (E230 where bf16 is emulated); the
        # checkpoint holds fp32 only, so a run resumes in either precision
        self.model.set_training_precision(config.precision)
        self.net: torch.nn.Module = self.model
        if ctx.distributed:
            self.net = DistributedDataParallel(
                self.model, device_ids=[ctx.device] if ctx.device.type == "cuda" else None)
        self.optimizer = make_optimizer(config, self.model)
        if position.optimizer is not None:
            self.optimizer.load_state_dict(position.optimizer)
        self.step, self.tokens = position.step, position.tokens
        self.elapsed, self.cpu_elapsed = position.elapsed, position.cpu_elapsed
        source = SentenceSource(self.files, self.settings, seed=config.seed, rank=ctx.rank,
                                world_size=ctx.world_size, buffer_size=config.shuffle_buffer,
                                state=position.source)
        maker = BatchMaker(vocab, bilm.options.max_characters_per_token)
        self.streams = TrainStreams(source, maker, rows=config.batch_size,
                                    window=config.window, buffers=position.buffers)
        self.state = position.lstm if position.lstm is not None else LSTMState.zeros(
            bilm.options, config.batch_size, ctx.device)
        if dev is None and config.dev:  # not read by `start` (resume, other ranks)
            dev = read_dev(config, self.settings, vocab)
        self.dev = (dev_batches(dev, maker, rows=config.batch_size, window=config.window)
                    if dev else [])
        if ctx.is_main:
            write_json(self.out / names.CONFIG_NAME, config.to_dict())
        self._plot_warned = False
        self._log_warned = False
        # the step of the checkpoint on disk (a resumed run starts from one)
        self.saved_step = position.step if position.source is not None else None
        self.pending = position.pending

    def train_step(self) -> float:
        batch = self.streams.next_batch().to(self.ctx.device)
        if self.config.state_reset > 0:
            self.state = reset_rows(self.state, self.config.state_reset)
        out = self.net(batch, self.state)
        self.state = out.state.detach()  # fp32 in either precision
        loss = out.mean_loss
        update(self.config, self.model, self.optimizer, loss,
               self.config.lr * lr_factor(self.config, self.step))
        self.step += 1
        self.tokens += int(batch.lengths.sum()) * self.ctx.world_size
        return loss.item()

    def evaluate(self) -> Dict[str, float]:
        """Full-softmax dev perplexity: forward, backward and their mean."""
        return evaluate_lm(self.model, self.dev, self.ctx.device)

    def checkpoint(self) -> None:
        """Gather every process's stream state; rank 0 writes the file (never with
        weights that are not finite: E141)."""
        cuda = self.ctx.device.type == "cuda"
        mine = {
            "source": asdict(self.streams.source.state),
            "buffers": [[b.fwd, b.bwd] for b in self.streams.buffers],
            "h": self.state.h.cpu(), "c": self.state.c.cpu(),
            "rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(self.ctx.device) if cuda else None,
        }
        ranks = ddp.gather(self.ctx, mine)
        check_finite(self.model, f"the checkpoint of step {self.step}")  # on every process
        if self.ctx.is_main:
            save_checkpoint(self.out / names.CHECKPOINT_NAME, {
                "step": self.step, "tokens": self.tokens, "elapsed": self.elapsed,
                "cpu_elapsed": self.cpu_elapsed,
                "world_size": self.ctx.world_size, "frozen": self.frozen,
                "options": self.options, "vocab": self.vocab.words,
                "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "ranks": ranks, "pending": list(self.pending),
            })
            self.saved_step = self.step

    def snapshot(self, dev: Optional[Dict[str, float]]) -> None:
        """Export the current model to snapshots/step_N/ with its dev perplexity."""
        if dev is None and self.dev:
            dev = self.evaluate()
        write_snapshot(self.model, self.vocab.words, self.out, self.step,
                       {"step": self.step, "tokens": self.tokens, **(dev or {})})

    def catch_up(self) -> Tuple[Optional[Dict[str, float]], int]:
        """On resume, the dev evaluation and the snapshot of the checkpoint's step that a
        stop left undone (the checkpoint's `pending`; a stop during either saves the step
        without them); (dev, its step), (None, -1) when there was nothing to do."""
        if not self.ctx.is_main or not self.pending:
            return None, -1
        dev: Optional[Dict[str, float]] = None
        if "dev" in self.pending and self.dev:
            dev = self.evaluate()
            self.log_dev(dev)
        if "snapshot" in self.pending:
            self.snapshot(dev)
        self.pending = ()
        return dev, self.step if dev is not None else -1

    def snapshot_due(self) -> bool:
        """Whether this step is one that snapshot_every asks a snapshot of."""
        every = self.config.snapshot_every
        return every is not None and every > 0 and self.step % every == 0

    def log_dev(self, dev: Dict[str, float]) -> None:
        """The dev evaluation of this step, in metrics.jsonl and the curves."""
        self.log({"type": "dev", "step": self.step, "tokens": self.tokens,
                  "elapsed_s": self.elapsed, "cpu_s": self.cpu_elapsed, **dev})
        self.plot()

    def log(self, record: Dict[str, Any]) -> None:
        if not self.ctx.is_main:
            return
        path = self.out / names.METRICS_NAME
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        except OSError as err:
            if not self._log_warned:
                tqdm.write(Warnings.W014.format(path=path, err=err))
                self._log_warned = True

    def plot(self) -> None:
        """Redraw curves.png; a failure to write it (a full disk) warns once, never ends
        the run."""
        if not self.ctx.is_main:
            return
        path = self.out / names.CURVES_NAME
        try:
            drawn = draw_curves(self.out / names.METRICS_NAME, path)
        except (OSError, ElmoError) as err:  # DiskFull is an ElmoError
            if not self._plot_warned:
                tqdm.write(Warnings.W016.format(path=path, err=first_line(err)))
                self._plot_warned = True
            return
        if not drawn and not self._plot_warned:
            tqdm.write(Warnings.W012)
            self._plot_warned = True

    def out_of_time(self) -> bool:
        """Whether the run has spent `max_minutes` of training time or `max_cpu_minutes` of
        its CPU time (on any process)."""
        wall, cpu = self.config.max_minutes, self.config.max_cpu_minutes
        if wall is None and cpu is None:
            return False
        spent = ((wall is not None and self.elapsed >= 60 * wall)
                 or (cpu is not None and self.cpu_elapsed >= 60 * cpu))
        return ddp.any_flag(self.ctx, spent)[0]

    def stop_if_not_finite(self, loss: float, bar: tqdm) -> None:
        """E140 (on every process) when the loss of the step just taken, on any process,
        is NaN or inf: training on would only spread it through the weights."""
        if ddp.any_flag(self.ctx, not math.isfinite(loss))[0]:
            bar.close()
            kept = ("No checkpoint was written yet." if self.saved_step is None else
                    f"The checkpoint of step {self.saved_step} is kept.")
            self.log({"type": "error", "step": self.step, "error": "loss not finite",
                      "loss": str(loss)})
            raise ElmoError(Errors.E140.format(step=self.step, loss=loss, kept=kept))

    def run(self) -> TrainResult:
        config = self.config
        bar = tqdm(total=config.max_steps, initial=self.step, unit="step",
                   disable=not (self.progress and self.ctx.is_main), dynamic_ncols=True)
        last_saved = time.monotonic()
        interval_time, interval_tokens, losses = 0.0, self.tokens, []
        dev: Optional[Dict[str, float]] = None
        dev_step = -1
        stopped = False
        first_step = self.step
        self.log({"type": "start", "step": self.step, "tokens": self.tokens,
                  "hardware": describe_device(self.ctx.device), "world_size": self.ctx.world_size,
                  "threads": torch.get_num_threads(), "precision": config.precision,
                  "torch": torch.__version__})
        with StopSignal(interruptible=not self.ctx.distributed) as stop:
            last = self.step >= config.max_steps or self.out_of_time()
            try:
                dev, dev_step = self.catch_up()
            except StopRequested:  # the checkpoint of this step is on disk already
                stopped = last = True
            while not last:
                t0, cpu0 = time.monotonic(), time.process_time()
                try:
                    losses.append(self.train_step())
                except StopRequested:  # asked to stop while the step read its data
                    stopped = True
                    self.checkpoint()
                    break
                self.stop_if_not_finite(losses[-1], bar)
                self.elapsed += time.monotonic() - t0
                self.cpu_elapsed += time.process_time() - cpu0
                interval_time += time.monotonic() - t0
                bar.update(1)
                last = self.step >= config.max_steps or self.out_of_time()
                if self.step % config.log_every == 0 or last:
                    speed = (self.tokens - interval_tokens) / max(interval_time, 1e-9)
                    loss = sum(losses) / len(losses)
                    self.log({"type": "train", "step": self.step, "tokens": self.tokens,
                              "loss": loss, "ppl": math.exp(min(loss, 50.0)),
                              "lr": self.optimizer.param_groups[0]["lr"],
                              "tokens_per_s": speed, "elapsed_s": self.elapsed,
                              "cpu_s": self.cpu_elapsed})
                    bar.set_postfix({"tok/s": f"{speed:.0f}", "loss": f"{loss:.3f}",
                                     "ppl": f"{math.exp(min(loss, 50.0)):.1f}",
                                     **({"dev_ppl": f"{dev['dev_ppl']:.1f}"} if dev else {})})
                    interval_time, interval_tokens, losses = 0.0, self.tokens, []
                if self.dev and self.ctx.is_main and (self.step % config.eval_every == 0
                                                      or last):
                    try:
                        dev, dev_step = self.evaluate(), self.step
                    except StopRequested:  # the evaluation is left, the step kept
                        stopped = True
                        self.pending = ("dev", "snapshot") if self.snapshot_due() else ("dev",)
                        self.checkpoint()
                        break
                    self.log_dev(dev)
                if self.ctx.is_main and self.snapshot_due():
                    try:  # its own dev evaluation, when the step had none, may be left
                        self.snapshot(dev if dev_step == self.step else None)
                    except StopRequested:  # the step kept; a resume makes the snapshot
                        stopped = True
                        self.pending = ("snapshot",)
                        self.checkpoint()
                        break
                minutes = config.checkpoint_minutes
                due = (self.step % config.checkpoint_every == 0 or last
                       or (minutes is not None and time.monotonic() - last_saved > 60 * minutes))
                save, stopped = ddp.any_flag(self.ctx, due, stop.requested)
                if save or stopped:
                    self.checkpoint()
                    last_saved = time.monotonic()
                if stopped:
                    break
        bar.close()
        if not stopped and self.ctx.is_main:
            self.plot()
            export_model(self.model, self.vocab.words, self.out / names.MODEL_DIR)
        return TrainResult(self.step, self.model, stopped, dev, stop.signum,
                           trained=self.step - first_step)


def train(config: PretrainConfig, *, resume: bool = False, overwrite: bool = False,
          progress: bool = True) -> TrainResult:
    """Run (or resume) pretraining; under torchrun, every process calls this."""
    if resume and overwrite:
        raise ElmoError(Errors.E121.format(path=config.output))
    if config.threads:
        torch.set_num_threads(config.threads)
    ctx = ddp.setup(config.device)
    try:
        check_precision(config.precision, ctx.device, training=True)  # before any file
        check_memory(config, ctx.device)  # sizes that would exhaust memory: before any work
        if ctx.is_main:
            warn_inside_corpus(config)
        with RunLock(Path(config.output), active=ctx.is_main) as lock:
            trainer = (Trainer.resume(config, ctx, progress=progress, lock=lock) if resume
                       else Trainer.start(config, ctx, overwrite=overwrite, progress=progress,
                                          lock=lock))
            return trainer.run()
    finally:
        ddp.teardown(ctx)
