"""The stacked LSTM with projection, cell/projection clipping and residual connections.

Every parameter holds the forward and the backward direction stacked on its first axis;
both directions run as one batched op, or on two threads at once (`directions`). The input
projections of all timesteps are one matmul; rows are processed longest-first so that each
timestep touches only the rows still running.
Gates are in TensorFlow's order (i, j, f, o); `bias` is TensorFlow's `B`, and the constant
forget bias of 1.0 (which bilm-tf does not store) is added at run time (`forget_bias` in the
options: 0.0 for models that store the whole bias, as ELMoForManyLangs does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, List, Optional, Tuple, Union, cast

import torch
from torch import nn

from . import bf16
from .directions import BOTH, joined, run_directions
from .int8 import DirectionPair
from .lstm_fused import fused_lstm_layer, step_groups
from .options import BiLMOptions
from .precision import active_precision
from .stamp import DerivedCopies, WeightsVersion

Product = Callable[[torch.Tensor], torch.Tensor]
Recurrence = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Matrices = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # input, hidden, projection
Int8Pairs = Tuple[DirectionPair, DirectionPair, DirectionPair]


@dataclass
class LSTMState:
    """Per-row recurrent state: h (n_layers, 2, rows, proj), c (n_layers, 2, rows, dim)."""

    h: torch.Tensor
    c: torch.Tensor

    @classmethod
    def zeros(cls, options: BiLMOptions, rows: int, device: torch.device,
              dtype: torch.dtype = torch.float32) -> LSTMState:
        L = options.n_layers
        return cls(torch.zeros(L, 2, rows, options.projection_dim, device=device, dtype=dtype),
                   torch.zeros(L, 2, rows, options.lstm_dim, device=device, dtype=dtype))

    def detach(self) -> LSTMState:
        """The same state cut from the autograd graph (carried across windows or calls)."""
        return LSTMState(self.h.detach(), self.c.detach())


class ProjectedLSTMLayer(nn.Module):
    """One layer, both directions: weights (2, ...) with [0] forward and [1] backward."""

    forget_bias: torch.Tensor
    projection_rows = 512  # packed steps per input-projection matmul (bounds its memory)

    def __init__(self, input_dim: int, options: BiLMOptions) -> None:
        super().__init__()
        H, P = options.lstm_dim, options.projection_dim
        self.input_dim = input_dim
        self.cell_clip = options.cell_clip
        self.proj_clip = options.proj_clip
        self.w_input = nn.Parameter(torch.empty(2, input_dim, 4 * H))
        self.w_hidden = nn.Parameter(torch.empty(2, P, 4 * H))
        self.bias = nn.Parameter(torch.empty(2, 4 * H))
        self.w_proj = nn.Parameter(torch.empty(2, H, P))
        # with gradients and outside autocast: the hand-written backward of `lstm_fused`
        # (same forward, bitwise); under a caller's autocast or with False, autograd
        # through `_step`, the reference
        self.fused_backward = True
        # without gradients `precision`, with them `training_precision` (`precision.py`):
        # "bf16" through bf16 copies of the three matrices, "int8" (inference only)
        # through int8 copies
        self.precision = "fp32"
        self.training_precision = "fp32"
        self.copies = DerivedCopies()
        self.version = WeightsVersion(self)  # a biLM gives its parts its own
        forget = torch.zeros(4 * H)
        forget[2 * H : 3 * H] = options.forget_bias  # 1.0 in bilm-tf, 0.0 in EFML
        self.register_buffer("forget_bias", forget, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        H = self.w_proj.shape[1]
        bound = (6.0 / (self.input_dim + self.w_hidden.shape[1] + 4 * H)) ** 0.5
        nn.init.uniform_(self.w_input, -bound, bound)
        nn.init.uniform_(self.w_hidden, -bound, bound)
        nn.init.zeros_(self.bias)
        nn.init.uniform_(self.w_proj, -(3.0 / H) ** 0.5, (3.0 / H) ** 0.5)

    def _matrices(self, precision: str) -> Union[None, Matrices, Int8Pairs]:
        """The input, recurrent and projection matrices a call of `precision` multiplies
        by: None for the fp32 weights themselves, else their bf16 or int8 copies (kept for
        inference until the weights change; with gradients, bf16 cast anew each call)."""
        weights = (self.w_input, self.w_hidden, self.w_proj)
        if precision == "fp32":
            return None
        if precision == "bf16" and torch.is_grad_enabled():
            return cast(Matrices, tuple(bf16.copy(w) for w in weights))
        if precision == "bf16":
            return self.copies.get("bf16", self.version, lambda: cast(
                Matrices, tuple(bf16.copy(w) for w in weights)))
        return self.copies.get("int8", self.version, lambda: cast(
            Int8Pairs, tuple(DirectionPair(w) for w in weights)))

    def _products(self, dirs: slice, matrices: Union[None, Matrices, Int8Pairs]
                  ) -> Tuple[Product, Recurrence, Product]:
        """The input product, the recurrent step (input gates + h @ W_hidden) and the
        projection of the directions `dirs`: through int8 copies, or batched matmuls of the
        fp32 weights (None) or of bf16 copies (the recurrent step a baddbmm, op for op as in
        `lstm_fused`)."""
        if matrices is not None and isinstance(matrices[0], DirectionPair):
            pairs = cast(Int8Pairs, matrices)
            project_input, recur, project = (
                pairs if dirs == BOTH else tuple(p.directions[dirs.start] for p in pairs))
            return project_input, lambda gates, h: gates + recur(h), project
        w_input, w_hidden, w_proj = (
            _directions(w, dirs) for w in (matrices or (self.w_input, self.w_hidden,
                                                        self.w_proj)))
        return (lambda x: bf16.bmm(x, w_input),
                lambda gates, h: bf16.baddbmm(gates, h, w_hidden),
                lambda m: bf16.bmm(m, w_proj))

    def run_packed(self, x: torch.Tensor, batch_sizes: List[int], h0: torch.Tensor,
                   c0: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run both directions over packed steps (on two threads at once where
        `directions.use_concurrent` says so).

        x: (2, sum(batch_sizes), in), rows sorted longest-first, step t's rows after step
        t-1's (as in `torch.nn.utils.rnn.PackedSequence`); batch_sizes[t] rows run at step t.
        Returns the outputs packed alike (2, sum(batch_sizes), proj) and the final (h, c),
        each row's taken after its own last step."""
        sizes = [n for n in batch_sizes if n > 0]
        # the copies made here, not by both directions' threads at once
        matrices = self._matrices(active_precision(self.precision, self.training_precision))
        if (self.fused_backward and sizes and torch.is_grad_enabled()
                and not torch.is_autocast_enabled(x.device.type)):
            # bf16 copies: the fused backward computes their gradients itself
            compute = None if matrices is None else cast(
                Matrices, tuple(cast(torch.Tensor, m).detach() for m in matrices))
            return fused_lstm_layer(x, self.w_input, self.w_hidden,
                                    self.bias + self.forget_bias, self.w_proj, h0, c0, sizes,
                                    self.cell_clip, self.proj_clip, self.projection_rows,
                                    compute)
        bias = self.bias + self.forget_bias

        def run(dirs: slice) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            return self._run(x[dirs], sizes, h0[dirs], c0[dirs], bias[dirs, None, :],
                             self._products(dirs, matrices))

        out, h, c = cast(List[torch.Tensor], joined(run_directions(run, x.device)))
        return out, h, c

    def _run(self, x: torch.Tensor, sizes: List[int], h0: torch.Tensor, c0: torch.Tensor,
             bias: torch.Tensor, products: Tuple[Product, Recurrence, Product]
             ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`run_packed` for the directions on the first axis of x, h0, c0 and bias."""
        project_input, recur, project = products
        h, c = h0, c0
        outputs: List[torch.Tensor] = []
        done_h: List[torch.Tensor] = []  # final states of rows that ended, last rows first
        done_c: List[torch.Tensor] = []
        for group, group_sizes in _step_groups(x, sizes, self.projection_rows):
            # the input projections of many steps at once (bmm + add_ beats baddbmm's
            # broadcast copy); groups bound the memory of long or wide batches
            gates_x = project_input(group).add_(bias)
            for gates_t in gates_x.split(group_sizes, dim=1):
                n = gates_t.shape[1]
                if n < h.shape[1]:
                    done_h.append(h[:, n:])
                    done_c.append(c[:, n:])
                    h, c = h[:, :n], c[:, :n]
                h, c = self._step(recur(gates_t, h), c, project)
                outputs.append(h)
        final_h = torch.cat([h, *done_h[::-1]], dim=1) if done_h else h
        final_c = torch.cat([c, *done_c[::-1]], dim=1) if done_c else c
        out = (torch.cat(outputs, dim=1) if outputs
               else x.new_zeros(x.shape[0], 0, h0.shape[-1]))
        return out, final_h, final_c

    def _step(self, gates: torch.Tensor, c: torch.Tensor, project: Product
              ) -> Tuple[torch.Tensor, torch.Tensor]:
        """One timestep from all gates' pre-activations (inputs, recurrence and bias).

        One sigmoid over all four gate blocks (the candidate's is unused): fewer, larger
        elementwise ops, which matters when each op has to wake the thread pool."""
        H = c.shape[-1]
        sig = torch.sigmoid(gates)
        c = torch.addcmul(sig[..., 2 * H : 3 * H] * c, sig[..., :H],
                          torch.tanh(gates[..., H : 2 * H]))
        if self.cell_clip is not None:
            c = c.clamp(-self.cell_clip, self.cell_clip)
        h = project(torch.tanh(c) * sig[..., 3 * H :])
        if self.proj_clip is not None:
            h = h.clamp(-self.proj_clip, self.proj_clip)
        return h, c


def _step_groups(x: torch.Tensor, sizes: List[int], max_rows: int
                 ) -> Iterator[Tuple[torch.Tensor, List[int]]]:
    """Runs of consecutive packed steps of x (2, sum(sizes), in), each of about `max_rows`
    rows (at least one step), with their step sizes."""
    groups = step_groups(sizes, max_rows)
    return zip(x.split([sum(g) for g in groups], dim=1), groups, strict=True)


def _directions(weight: torch.Tensor, dirs: slice) -> torch.Tensor:
    """The stacked weight itself for both directions (one autograd node fewer), else its
    slice."""
    return weight if dirs == BOTH else weight[dirs]


def _valid_steps(batch_sizes: List[int], rows: int, device: torch.device) -> torch.Tensor:
    """(steps, rows) bool: row r runs at step t (rows sorted longest-first)."""
    sizes = torch.tensor(batch_sizes, device=device, dtype=torch.long)
    return torch.arange(rows, device=device)[None, :] < sizes[:, None]


def _unpack(packed: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(2, n_valid, d) -> (2, steps, rows, d), zero where `valid` is False."""
    out = packed.new_zeros(2, *valid.shape, packed.shape[-1])
    out[:, valid] = packed
    return out


class BiLSTMStack(nn.Module):
    """`n_layers` projected LSTM layers per direction, residual from layer 1 on."""

    def __init__(self, options: BiLMOptions) -> None:
        super().__init__()
        self.options = options
        P = options.projection_dim
        self.layers = nn.ModuleList(ProjectedLSTMLayer(P, options)
                                    for _ in range(options.n_layers))
        self.dropout = nn.Dropout(0.0)

    def set_fused_backward(self, fused: bool) -> None:
        """Train with the hand-written backward (True) or autograd's (False). Under a
        caller's autocast autograd's runs either way."""
        for layer in cast(Iterable[ProjectedLSTMLayer], self.layers):
            layer.fused_backward = fused

    def set_precision(self, precision: str, *, training: bool = False) -> None:
        """The inference precision (fp32, bf16, int8), or with `training` the precision
        with gradients (fp32, bf16), of every layer."""
        for layer in cast(Iterable[ProjectedLSTMLayer], self.layers):
            if training:
                layer.training_precision = precision
            else:
                layer.precision = precision

    def forward(self, x_fwd: torch.Tensor, x_bwd: torch.Tensor, lengths: torch.Tensor,
                state: Optional[LSTMState] = None) -> Tuple[List[torch.Tensor], LSTMState]:
        """x_fwd, x_bwd: (rows, steps, proj), each in the order its direction reads.

        Returns one (2, rows, steps, proj) tensor per layer ([0] forward, [1] backward, each
        in its own reading order, residual included) and every row's final state.
        """
        rows, steps, _ = x_fwd.shape
        if state is None:
            # at least fp32: under a caller's bf16 autocast the cell state stays fp32
            dtype = torch.promote_types(x_fwd.dtype, torch.float32)
            state = LSTMState.zeros(self.options, rows, x_fwd.device, dtype)
        order = torch.argsort(lengths, descending=True, stable=True)
        inverse = torch.argsort(order)
        steps_range = torch.arange(steps, device=lengths.device)
        batch_sizes = (lengths[None, :] > steps_range[:, None]).sum(1).tolist()
        valid = _valid_steps(batch_sizes, rows, x_fwd.device)
        # (2, n_valid, proj): the real steps of the length-sorted rows, packed
        inputs = torch.stack([x_fwd, x_bwd])[:, order].transpose(1, 2)[:, valid]
        h_all, c_all = state.h[:, :, order], state.c[:, :, order]
        outputs: List[torch.Tensor] = []
        final_h, final_c = [], []
        for k, layer in enumerate(cast(Iterable[ProjectedLSTMLayer], self.layers)):
            dropped = self.dropout(inputs)
            out, h, c = layer.run_packed(dropped, batch_sizes, h_all[k], c_all[k])
            if k > 0 and self.options.use_skip_connections:
                out = out + dropped
            final_h.append(h)
            final_c.append(c)
            outputs.append(_unpack(out, valid).transpose(1, 2)[:, inverse])
            inputs = out
        final = LSTMState(torch.stack(final_h)[:, :, inverse], torch.stack(final_c)[:, :, inverse])
        return outputs, final
