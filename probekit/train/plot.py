"""Training curves: accuracy and loss of every split vs step (log x), saved as PNG (Agg)."""

from __future__ import annotations

from pathlib import Path

from .history import History


def plot_history(
    history: History, path: str | Path, *, metric: str = "acc", title: str | None = None
) -> Path:
    """Two panels: ``<split>/<metric>`` and ``<split>/loss`` for every split, x on a symlog axis.

    Step 0 (before training) is kept by using ``symlog`` with a linear range ``[0, 1]``.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    if len(history) == 0:
        raise ValueError("plot_history: history has no records; train for at least one evaluation")
    splits = [k[: -len(f"/{metric}")] for k in history.keys if k.endswith(f"/{metric}")]
    if not splits:
        raise ValueError(f"plot_history: no '<split>/{metric}' columns in {history.keys}")
    steps = history.steps
    grouped = [s for s in splits if s.rsplit("_", 1)[-1].isdigit()]  # ood_len_5 ... (thin, dashed)
    main = [s for s in splits if s not in grouped]
    palette = plt.get_cmap("tab10")
    shades = plt.get_cmap("viridis")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for k, s in enumerate(grouped):
        kw = dict(ls="--", lw=0.9, alpha=0.5, color=shades(k / max(len(grouped) - 1, 1)), label=s)
        axes[0].plot(steps, history.column(f"{s}/{metric}"), **kw)
        axes[1].plot(steps, history.column(f"{s}/loss"), **kw)
    for k, s in enumerate(main):
        kw = dict(ls="-", lw=1.8, color=palette(k % 10), label=s)
        axes[0].plot(steps, history.column(f"{s}/{metric}"), **kw)
        axes[1].plot(steps, history.column(f"{s}/loss"), **kw)
    axes[0].set_ylabel(metric)
    axes[0].set_ylim(-0.02, 1.02)
    axes[1].set_ylabel("loss (CE per target token)")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlim(0, max(steps[-1], 1))
        ax.set_xlabel("step")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
