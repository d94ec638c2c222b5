"""The bench plot: GB/s against size, one panel per op, one line per implementation (PNG)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lazyfuel.bench.best_of import Timing
from lazyfuel.bench.workloads import IMPLEMENTATIONS

_STYLE = {"numpy": ("tab:blue", "o"), "dask": ("tab:orange", "s"), "lazyfuel": ("tab:green", "^")}


def plot(timings: Sequence[Timing], out: str | Path, device: str) -> Path:
    """Write the plot of `timings` to `out` (PNG) with matplotlib's Agg backend; the path.

    ImportError naming the extra to install when matplotlib is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, LogLocator
    except ImportError:
        raise ImportError("lazyfuel bench draws with matplotlib: pip install 'lazyfuel[plot]'") from None
    ops = list(dict.fromkeys(t.op for t in timings))
    cols = min(2, len(ops))
    rows = (len(ops) + cols - 1) // cols
    header = 0.85  # inches above the panels for the title and the legend, whatever the row count
    height = 4.2 * rows + header
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, height), squeeze=False)
    for ax, op in zip(axes.flat, ops):
        for impl in IMPLEMENTATIONS:
            points = sorted((t.size, t.gbps) for t in timings if t.op == op and t.impl == impl)
            if not points:
                continue
            color, marker = _STYLE.get(impl, (None, "x"))
            ax.plot([p[0] / 2**20 for p in points], [p[1] for p in points], marker=marker, color=color,
                    label=impl, linewidth=2)
        sizes = sorted({t.size / 2**20 for t in timings if t.op == op})
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [f"{s:g}" for s in sizes])
        ax.minorticks_off()
        rates = [t.gbps for t in timings if t.op == op]
        log = max(rates) > 20 * min(rates)  # log only where implementations differ by > 20x
        if log:
            ax.set_yscale("log")
            plain = FuncFormatter(lambda v, _: f"{v:g}")
            ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
        else:
            ax.set_ylim(0, max(rates) * 1.15)
        ax.set_title(op)
        ax.set_xlabel("source size (MiB)")
        ax.set_ylabel(f"GB/s{', log scale' if log else ''} (bytes moved / wall time)")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(ops):]:
        ax.set_visible(False)
    fig.suptitle(f"lazyfuel bench: throughput by op and size, higher is better\n{device}", fontsize=12,
                 y=1 - 0.08 / height, va="top")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), bbox_to_anchor=(0.5, 1 - 0.55 / height),
               frameon=False, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 1 - header / height))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
