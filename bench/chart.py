"""The per-step overhead chart for docs/benchmarks.md (needs matplotlib, in the `bench` extra).

python bench/chart.py bench/results/react_overhead.json docs/img/react_overhead.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def draw(results: dict[str, Any], path: Path) -> str:
    """Write a log-log chart of best us/step against run length; returns what happened."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display here
        import matplotlib.pyplot as plt
    except ImportError:
        return "chart skipped: matplotlib is not installed (pip install -e '.[bench]')"
    fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=90)
    for name, r in results.items():
        points = sorted((int(n), min(samples)) for n, samples in r["us"].items())
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", label=name)
            ax.annotate(
                f"{ys[-1]:,.1f}" if ys[-1] < 100 else f"{ys[-1]:,.0f}",
                (xs[-1], ys[-1]),
                textcoords="offset points",
                xytext=(6, -3),
                fontsize=8,
            )
    ax.set_xlim(7, 2500)  # room for the end labels
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("run length (tool steps)")
    ax.set_ylabel("CPU time per step (us, best run)")
    ax.set_title("ReAct loop overhead per step, zero-latency model")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return f"chart written to {path} ({path.stat().st_size // 1024} KB)"


if __name__ == "__main__":
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    print(draw(json.loads(source.read_text()), target))
