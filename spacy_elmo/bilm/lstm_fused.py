"""A projected-LSTM layer with a hand-written backward pass, for training.

The forward pass is the same arithmetic as `ProjectedLSTMLayer._step`, op for op, so its
outputs are bitwise those of the autograd path; it keeps what the backward needs in packed
buffers (one row per packed step, as the input). The backward runs the recurrence in
reverse with a handful of fused elementwise ops per step, and computes every weight
gradient (input, hidden, projection, bias) and the input gradient as one large matmul over
all steps, instead of autograd's small per-step products and its zero-filled gate slices.
Forward and backward run both directions as one batched op, or each on its own thread
(`directions`). With `compute` (bf16 copies of the three matrices), every product runs in
bf16 (`bf16.py`: the activations cast to bf16, results and sums in fp32), the weight
gradients too, and they come back in fp32 for the fp32 master weights.
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Tuple, cast

import torch

from . import bf16
from .directions import joined, run_directions

Weights = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def fused_lstm_layer(x: torch.Tensor, w_input: torch.Tensor, w_hidden: torch.Tensor,
                     bias: torch.Tensor, w_proj: torch.Tensor, h0: torch.Tensor,
                     c0: torch.Tensor, sizes: List[int], cell_clip: Optional[float],
                     proj_clip: Optional[float], group_rows: int,
                     compute: Optional[Weights] = None
                     ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Packed steps x (2, N, in) -> outputs (2, N, proj), final h (2, R, proj) and c.

    `bias` includes the constant forget bias; `sizes` are the rows running at each step
    (non-increasing, positive, summing to N). `compute`: the (input, hidden, projection)
    matrices the products use (bf16 copies), gradients still going to the fp32 weights;
    None: the weights themselves."""
    out, h, c = _FusedLSTM.apply(x, w_input, w_hidden, bias, w_proj, h0, c0, sizes,
                                 cell_clip, proj_clip, group_rows, compute)
    return out, h, c


def step_groups(sizes: List[int], max_rows: int) -> List[List[int]]:
    """Consecutive steps in runs of about `max_rows` packed rows (at least one step)."""
    groups: List[List[int]] = []
    rows = 0
    for n in sizes:
        if not groups or rows + n > max_rows:
            groups.append([])
            rows = 0
        groups[-1].append(n)
        rows += n
    return groups


class _FusedLSTM(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w_input: torch.Tensor, w_hidden: torch.Tensor,
                bias: torch.Tensor, w_proj: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor,
                sizes: List[int], cell_clip: Optional[float], proj_clip: Optional[float],
                group_rows: int, compute: Optional[Weights]
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        H = w_proj.shape[1]
        wi, wh, wp = compute if compute is not None else (w_input, w_hidden, w_proj)
        N = x.shape[1]
        P = h0.shape[-1]
        saved = _Saved(
            acts=x.new_empty(2, N, 4 * H),  # sigmoid(i), tanh(j), sigmoid(f), sigmoid(o)
            c_prev=x.new_empty(2, N, H),
            c_raw=x.new_empty(2, N, H) if cell_clip is not None else None,
            tanh_c=x.new_empty(2, N, H),
            m_all=x.new_empty(2, N, H),  # tanh(c) * o, the projection's input
            h_prev=x.new_empty(2, N, P),
            h_raw=x.new_empty(2, N, P) if proj_clip is not None else None)
        out = x.new_empty(2, N, P)

        def run(d: slice) -> Tuple[torch.Tensor, torch.Tensor]:
            return _forward(x[d], wi[d], wh[d], bias[d], wp[d], h0[d], c0[d], out[d],
                            saved.part(d), sizes, (cell_clip, proj_clip), group_rows)

        final_h, final_c = cast(List[torch.Tensor], joined(run_directions(run, x.device)))
        ctx.sizes = sizes
        ctx.clips = (cell_clip, proj_clip)
        ctx.n_rows = h0.shape[1]
        ctx.save_for_backward(x, wi, wh, wp, saved.acts, saved.c_prev,
                              saved.tanh_c, saved.m_all, saved.h_prev,
                              *(t for t in (saved.c_raw, saved.h_raw) if t is not None))
        return out, final_h, final_c

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor, grad_h: torch.Tensor,
                 grad_c: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        x, w_input, w_hidden, w_proj, acts, c_prev, tanh_c, m_all, h_prev, *raw = (
            ctx.saved_tensors)
        cell_clip, proj_clip = ctx.clips
        saved = _Saved(acts, c_prev, raw.pop(0) if cell_clip is not None else None, tanh_c,
                       m_all, h_prev, raw.pop(0) if proj_clip is not None else None)
        need = ctx.needs_input_grad

        def run(d: slice) -> List[Optional[torch.Tensor]]:
            return _backward(x[d], w_input[d], w_hidden[d], w_proj[d], saved.part(d),
                             grad_out[d], grad_h[d], grad_c[d], ctx.sizes, ctx.clips,
                             ctx.n_rows, need)

        return (*joined(run_directions(run, x.device)), None, None, None, None, None)


class _Saved(NamedTuple):
    """What the forward keeps for the backward, one row per packed step."""

    acts: torch.Tensor
    c_prev: torch.Tensor
    c_raw: Optional[torch.Tensor]  # before the cell clip (None without one)
    tanh_c: torch.Tensor
    m_all: torch.Tensor
    h_prev: torch.Tensor
    h_raw: Optional[torch.Tensor]  # before the projection clip (None without one)

    def part(self, d: slice) -> _Saved:
        """The views of the directions `d`."""
        return _Saved._make(None if t is None else t[d] for t in self)


def _forward(x: torch.Tensor, w_input: torch.Tensor, w_hidden: torch.Tensor,
             bias: torch.Tensor, w_proj: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor,
             out: torch.Tensor, saved: _Saved, sizes: List[int],
             clips: Tuple[Optional[float], Optional[float]], group_rows: int
             ) -> Tuple[torch.Tensor, torch.Tensor]:
    """The forward of the directions on the first axis of every argument: fills `out` and
    `saved`, returns the final (h, c)."""
    cell_clip, proj_clip = clips
    H = w_proj.shape[1]
    acts, c_prev, c_raw, tanh_c, m_all, h_prev, h_raw = saved
    b = bias[:, None, :]
    h, c = h0, c0
    done_h: List[torch.Tensor] = []
    done_c: List[torch.Tensor] = []
    offset = 0
    for group_sizes in step_groups(sizes, group_rows):
        n_group = sum(group_sizes)
        gates_x = bf16.bmm(x[:, offset : offset + n_group], w_input).add_(b)
        for gates_t in gates_x.split(group_sizes, dim=1):
            n = gates_t.shape[1]
            rows = slice(offset, offset + n)
            if n < h.shape[1]:
                done_h.append(h[:, n:])
                done_c.append(c[:, n:])
                h, c = h[:, :n], c[:, :n]
            h_prev[:, rows] = h
            c_prev[:, rows] = c
            gates = bf16.baddbmm(gates_t, h, w_hidden)
            act = acts[:, rows]
            torch.sigmoid(gates, out=act)
            act[..., H : 2 * H] = torch.tanh(gates[..., H : 2 * H])
            c = torch.addcmul(act[..., 2 * H : 3 * H] * c, act[..., :H], act[..., H : 2 * H])
            if c_raw is not None:
                c_raw[:, rows] = c
                c = c.clamp(-cell_clip, cell_clip)  # type: ignore[operator]
            tc = torch.tanh(c)
            tanh_c[:, rows] = tc
            m = tc * act[..., 3 * H :]
            m_all[:, rows] = m
            h = bf16.bmm(m, w_proj)
            if h_raw is not None:
                h_raw[:, rows] = h
                h = h.clamp(-proj_clip, proj_clip)  # type: ignore[operator]
            out[:, rows] = h
            offset += n
    final_h = torch.cat([h, *done_h[::-1]], dim=1) if done_h else h
    final_c = torch.cat([c, *done_c[::-1]], dim=1) if done_c else c
    return final_h, final_c


def _backward(x: torch.Tensor, w_input: torch.Tensor, w_hidden: torch.Tensor,
              w_proj: torch.Tensor, saved: _Saved, grad_out: torch.Tensor,
              grad_h: torch.Tensor, grad_c: torch.Tensor, sizes: List[int],
              clips: Tuple[Optional[float], Optional[float]], R: int, need: Tuple[bool, ...]
              ) -> List[Optional[torch.Tensor]]:
    """The gradients of x, the four weights, h0 and c0 for the directions on the first
    axis of every argument (None where not needed); the weights are those the forward
    multiplied by (bf16 copies: the products in bf16, the gradients in fp32)."""
    cell_clip, proj_clip = clips
    acts, c_prev, c_raw, tanh_c, m_all, h_prev, h_raw = saved
    H = w_proj.shape[1]
    d_gates = acts.new_empty(acts.shape)
    d_hraw = acts.new_empty(grad_out.shape)
    w_proj_t = w_proj.transpose(1, 2)
    w_hidden_t = w_hidden.transpose(1, 2)
    dh = grad_h.new_zeros(grad_h.shape[0], 0, grad_h.shape[-1])
    dc = grad_c.new_zeros(grad_c.shape[0], 0, grad_c.shape[-1])
    end = x.shape[1]
    # per step, on the step's own (cache-resident) slices: the elementwise work is
    # memory-bound, and whole-sequence temporaries would stream through memory
    for n in reversed(sizes):
        start = end - n
        rows = slice(start, end)
        # rows whose last step is this one bring the gradient of their final state
        if dh.shape[1] < n:
            dh = torch.cat([dh, grad_h[:, dh.shape[1] : n]], dim=1)
            dc = torch.cat([dc, grad_c[:, dc.shape[1] : n]], dim=1)
        # the gradient reaching this step's h (its output and the next step), then
        # through the projection clip
        g = torch.add(dh, grad_out[:, rows], out=d_hraw[:, rows])
        if h_raw is not None:
            g.masked_fill_(h_raw[:, rows].abs() > proj_clip, 0.0)  # type: ignore[operator]
        dm = bf16.bmm(g, w_proj_t)
        a = acts[:, rows]
        tc = tanh_c[:, rows]
        o = a[..., 3 * H :]
        dmo = dm * o
        dc = torch.addcmul(dc + dmo, dmo, tc * tc, value=-1.0)
        if c_raw is not None:
            dc.masked_fill_(c_raw[:, rows].abs() > cell_clip, 0.0)  # type: ignore[operator]
        dg = d_gates[:, rows]
        # d pre-activation = d activation * activation' : sigmoid' = a (1 - a) for
        # i, f, o; tanh' = 1 - j^2 for j
        torch.mul(a, 1.0 - a, out=dg)
        i, j, f = a[..., :H], a[..., H : 2 * H], a[..., 2 * H : 3 * H]
        dg[..., :H].mul_(j).mul_(dc)
        torch.addcmul(dc, dc * j, j, value=-1.0, out=dg[..., H : 2 * H]).mul_(i)
        dg[..., 2 * H : 3 * H].mul_(c_prev[:, rows]).mul_(dc)
        dg[..., 3 * H :].mul_(tc).mul_(dm)
        dc = dc * f
        dh = bf16.bmm(dg, w_hidden_t)
        end = start
    if dh.shape[1] < R:  # rows that never ran pass their final-state gradient through
        dh = torch.cat([dh, grad_h[:, dh.shape[1] :]], dim=1)
        dc = torch.cat([dc, grad_c[:, dc.shape[1] :]], dim=1)
    low = w_input.dtype
    return [bf16.bmm(d_gates, w_input.transpose(1, 2)) if need[0] else None,
            bf16.bmm_t(x, d_gates, low) if need[1] else None,
            bf16.bmm_t(h_prev, d_gates, low) if need[2] else None,
            d_gates.sum(1) if need[3] else None,
            bf16.bmm_t(m_all, d_hraw, low) if need[4] else None,
            dh if need[5] else None,
            dc if need[6] else None]
