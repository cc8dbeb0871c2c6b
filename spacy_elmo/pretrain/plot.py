"""Training-loss and dev-perplexity curves from `metrics.jsonl` (needs the `plot` extra)."""

from __future__ import annotations

import math
from pathlib import Path

from ..files.atomic import atomic_write
from .rundir import read_metrics


def draw_curves(metrics_path: Path, png_path: Path) -> bool:
    """Write the PNG; False (and nothing written) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    records = read_metrics(metrics_path)
    train = [r for r in records if r.get("type") == "train"]
    dev = [r for r in records if r.get("type") == "dev"]
    fig, (ax_loss, ax_dev) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot([r["step"] for r in train], [r["loss"] for r in train], lw=1)
    ax_loss.set(xlabel="step", ylabel="training loss (sampled softmax)", title="Training loss")
    for key, label in (("dev_ppl_fwd", "forward"), ("dev_ppl_bwd", "backward"),
                       ("dev_ppl", "mean")):
        ax_dev.plot([r["step"] for r in dev], [r[key] for r in dev], marker="o", label=label)
    if dev and all(r["dev_ppl"] > 0 and math.isfinite(r["dev_ppl"]) for r in dev):
        ax_dev.set_yscale("log")
    ax_dev.set(xlabel="step", ylabel="perplexity (full softmax)", title="Dev perplexity")
    ax_dev.legend()
    fig.tight_layout()
    try:
        with atomic_write(png_path, ".png") as tmp:
            fig.savefig(tmp, dpi=100)
    finally:
        plt.close(fig)
    return True
