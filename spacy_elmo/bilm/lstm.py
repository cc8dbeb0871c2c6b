"""The stacked LSTM with projection, cell/projection clipping and residual connections.

Both directions run together: every parameter holds the forward and the backward
direction stacked on its first axis. The input projections of all timesteps are one matmul;
rows are processed longest-first so that each timestep touches only the rows still running.
Gates are in TensorFlow's order (i, j, f, o); `bias` is TensorFlow's `B`, and the constant
forget bias of 1.0 (which bilm-tf does not store) is added at run time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .options import BiLMOptions


@dataclass
class LSTMState:
    """Per-row recurrent state: h (n_layers, 2, rows, proj), c (n_layers, 2, rows, dim)."""

    h: torch.Tensor
    c: torch.Tensor

    @classmethod
    def zeros(cls, options: BiLMOptions, rows: int, device: torch.device,
              dtype: torch.dtype = torch.float32) -> "LSTMState":
        L = options.n_layers
        return cls(torch.zeros(L, 2, rows, options.projection_dim, device=device, dtype=dtype),
                   torch.zeros(L, 2, rows, options.lstm_dim, device=device, dtype=dtype))

    def detach(self) -> "LSTMState":
        return LSTMState(self.h.detach(), self.c.detach())


class ProjectedLSTMLayer(nn.Module):
    """One layer, both directions: weights (2, ...) with [0] forward and [1] backward."""

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
        forget = torch.zeros(4 * H)
        forget[2 * H : 3 * H] = 1.0
        self.register_buffer("forget_bias", forget, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        H = self.w_proj.shape[1]
        bound = (6.0 / (self.input_dim + self.w_hidden.shape[1] + 4 * H)) ** 0.5
        nn.init.uniform_(self.w_input, -bound, bound)
        nn.init.uniform_(self.w_hidden, -bound, bound)
        nn.init.zeros_(self.bias)
        nn.init.uniform_(self.w_proj, -(3.0 / H) ** 0.5, (3.0 / H) ** 0.5)

    def forward(self, x: torch.Tensor, batch_sizes: List[int], h0: torch.Tensor,
                c0: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x: (2, steps, rows, in), rows sorted longest-first; batch_sizes[t] rows run at t.

        Returns outputs (2, steps, rows, proj) (zero where a row has ended) and the final
        (h, c), each row's taken after its own last step.
        """
        _, steps, rows, _ = x.shape
        H = self.w_proj.shape[1]
        bias = (self.bias + self.forget_bias)[:, None, :]
        gates_x = torch.baddbmm(bias, x.reshape(2, steps * rows, -1),
                                self.w_input).view(2, steps, rows, 4 * H)
        h, c = h0, c0
        outputs: List[torch.Tensor] = []
        for t in range(steps):
            n = batch_sizes[t]
            h_t, c_t = h[:, :n], c[:, :n]
            gates = torch.baddbmm(gates_x[:, t, :n], h_t, self.w_hidden)
            i, j, f, o = gates.chunk(4, dim=-1)
            c_new = torch.sigmoid(f) * c_t + torch.sigmoid(i) * torch.tanh(j)
            if self.cell_clip is not None:
                c_new = c_new.clamp(-self.cell_clip, self.cell_clip)
            h_new = torch.bmm(torch.sigmoid(o) * torch.tanh(c_new), self.w_proj)
            if self.proj_clip is not None:
                h_new = h_new.clamp(-self.proj_clip, self.proj_clip)
            if n < rows:
                outputs.append(F.pad(h_new, (0, 0, 0, rows - n)))
                h = torch.cat([h_new, h[:, n:]], dim=1)
                c = torch.cat([c_new, c[:, n:]], dim=1)
            else:
                outputs.append(h_new)
                h, c = h_new, c_new
        if not outputs:
            return x.new_zeros(2, 0, rows, h0.shape[-1]), h, c
        return torch.stack(outputs, dim=1), h, c


class BiLSTMStack(nn.Module):
    """`n_layers` projected LSTM layers per direction, residual from layer 1 on."""

    def __init__(self, options: BiLMOptions) -> None:
        super().__init__()
        self.options = options
        P = options.projection_dim
        self.layers = nn.ModuleList(ProjectedLSTMLayer(P, options)
                                    for _ in range(options.n_layers))
        self.dropout = nn.Dropout(0.0)

    def forward(self, x_fwd: torch.Tensor, x_bwd: torch.Tensor, lengths: torch.Tensor,
                state: Optional[LSTMState] = None) -> Tuple[List[torch.Tensor], LSTMState]:
        """x_fwd, x_bwd: (rows, steps, proj), each in the order its direction reads.

        Returns one (2, rows, steps, proj) tensor per layer ([0] forward, [1] backward, each
        in its own reading order, residual included) and every row's final state.
        """
        rows, steps, _ = x_fwd.shape
        if state is None:
            state = LSTMState.zeros(self.options, rows, x_fwd.device, x_fwd.dtype)
        order = torch.argsort(lengths, descending=True, stable=True)
        inverse = torch.argsort(order)
        steps_range = torch.arange(steps, device=lengths.device)
        batch_sizes = (lengths[None, :] > steps_range[:, None]).sum(1).tolist()
        # (2, steps, rows, proj), rows sorted
        inputs = torch.stack([x_fwd, x_bwd])[:, order].transpose(1, 2)
        h_all, c_all = state.h[:, :, order], state.c[:, :, order]
        outputs: List[torch.Tensor] = []
        final_h, final_c = [], []
        for k, layer in enumerate(self.layers):
            dropped = self.dropout(inputs)
            out, h, c = layer(dropped, batch_sizes, h_all[k], c_all[k])
            if k > 0 and self.options.use_skip_connections:
                out = out + dropped
            final_h.append(h)
            final_c.append(c)
            outputs.append(out.transpose(1, 2)[:, inverse])
            inputs = out
        final = LSTMState(torch.stack(final_h)[:, :, inverse], torch.stack(final_c)[:, :, inverse])
        return outputs, final
