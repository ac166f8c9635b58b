"""Plots of reproduced experiments (matplotlib, Agg backend): grouped bars on the paper's
axes (x = the varied parameter, y = bandwidth or normalised time), one panel per op."""

from __future__ import annotations

from pathlib import Path


def plot_result(res, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from .core import pivot

    exp = res.experiment
    if exp.family == "ci_accuracy":
        return _plot_accuracy(res, path, plt, np)
    series, cases, val = pivot(res.rows)
    ops = []
    for _, op in cases:
        if op not in ops:
            ops.append(op)
    fig, axes = plt.subplots(1, len(ops), figsize=(max(5.0, 4.5 * len(ops)), 3.6), squeeze=False)
    for ax, op in zip(axes[0], ops):
        xs = [x for x, o in cases if o == op]
        w = 0.8 / max(1, len(series))
        idx = np.arange(len(xs))
        for k, s in enumerate(series):
            v = [float(val.get((x, op, s), np.nan) or np.nan) for x in xs]
            ax.bar(idx + (k - (len(series) - 1) / 2) * w, v, w, label=s)
        ax.set_xticks(idx)
        ax.set_xticklabels(xs, rotation=30 if len(xs) > 4 else 0, fontsize=8, ha="right" if len(xs) > 4 else "center")
        ax.set_xlabel(exp.x_label)
        ax.set_ylabel(exp.y_label)
        if op:
            ax.set_title(op, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{exp.paper} {exp.figure}: {exp.title}" + (" (quick)" if res.quick else ""), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_accuracy(res, path, plt, np):
    groups = {}
    for r in res.rows:
        groups.setdefault((r["profile"], r["pattern"]), []).append(r)
    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 3.6), squeeze=False)
    colors = {"1-DH": "tab:blue", "2-D": "tab:orange", "1-DV": "tab:green"}
    for ax, ((prof, pat), rs) in zip(axes[0], groups.items()):
        for r in rs:
            ax.scatter(np.log2(r["size"] / 1024), r["procs"], c=colors[r["simulator_best"]], s=40,
                       marker="o" if r["value"] else "x")
        ax.set_yscale("log", base=2)
        ax.set_xlabel("request size (log2 KiB)")
        ax.set_ylabel("processes")
        acc = res.metrics.get(f"accuracy {prof} {pat}", 0.0)
        ax.set_title(f"{prof} {pat}: model right {acc * 100:.0f} %", fontsize=8)
    for k, c in colors.items():
        axes[0][0].scatter([], [], c=c, label=f"best: {k}")
    axes[0][0].scatter([], [], c="k", marker="x", label="model wrong")
    axes[0][0].legend(fontsize=6)
    fig.suptitle("CI-LAYOUT: simulator's best layout, model's choice (o right, x wrong)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
