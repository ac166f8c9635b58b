"""Least-squares fits of the per-request storage cost with confidence intervals.

Pre-estimation (CI-LAYOUT seed 002 §4 and §6.2, PADP seed 003 §3.5, PSA seed 001 §3.4)
measures every server kind's startup time α and per-byte time β for each op and access
pattern "with different request sizes", repeated many times.  From the mean time per
request ``T(s)`` at several sizes ``s`` two cost shapes are fitted:

- ``additive``: ``T(s) = α + β·s`` — the papers' model (seek/startup plus transfer), what a
  real disk does;
- ``max``: ``T(s) = max(α, β·s)`` — a rate-limited device: a token-bucket throttle (the
  blkio cgroup of :mod:`pario.testbed`) or a device whose command rate and bandwidth limits
  overlap.  α is the small-request plateau (1/IOPS), β the large-request slope (1/bandwidth).

Both fits are weighted least squares on *relative* residuals ``(T_i − f(s_i)) / T_i``
(weights 1/T²), so a 4 KiB point counts as much as an 8 MiB one.  ``auto`` keeps the shape
with the smaller relative RMS residual of the per-size medians; :func:`check` refuses a fit
whose residuals are unreasonable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from .. import ParioError
from ..units import format_size

MODELS = ("auto", "additive", "max")


@dataclass(frozen=True)
class Fit:
    """One fitted cost curve: ``model``, α and β with ``conf`` confidence intervals, residuals."""

    model: str
    alpha: float
    beta: float
    alpha_ci: tuple[float, float]
    beta_ci: tuple[float, float]
    rel_rms: float  # relative RMS residual of the per-size medians
    worst_size: int  # request size with the largest relative residual
    worst_rel: float  # that residual (signed: (measured − fitted) / measured)
    n: int  # number of samples
    conf: float = 0.95
    notes: tuple[str, ...] = field(default=())

    def predict(self, s) -> np.ndarray:
        s = np.asarray(s, dtype=float)
        if self.model == "max":
            return np.maximum(self.alpha, self.beta * s)
        return self.alpha + self.beta * s

    def to_dict(self) -> dict:
        return {"model": self.model, "alpha": self.alpha, "beta": self.beta, "alpha_ci": list(self.alpha_ci),
                "beta_ci": list(self.beta_ci), "rel_rms": self.rel_rms, "worst_size": self.worst_size,
                "worst_rel": self.worst_rel, "n": self.n, "conf": self.conf, "notes": list(self.notes)}


def _prep(sizes, times):
    s = np.asarray(sizes, dtype=float).ravel()
    t = np.asarray(times, dtype=float).ravel()
    if s.shape != t.shape or s.size == 0:
        raise ParioError("fit needs equally long, non-empty size and time arrays")
    if not (np.all(np.isfinite(t)) and np.all(t > 0) and np.all(s > 0)):
        raise ParioError("fit needs positive, finite sizes and times")
    return s, t


def _residual_summary(s, t, pred_fn):
    """Relative residuals of the per-size medians: (rms, worst size, worst signed residual)."""
    u, inv = np.unique(s, return_inverse=True)
    med = np.array([np.median(t[inv == k]) for k in range(u.size)])
    rel = (med - pred_fn(u)) / med
    k = int(np.argmax(np.abs(rel)))
    return float(np.sqrt(np.mean(rel**2))), int(u[k]), float(rel[k])


def fit_additive(sizes, times, conf: float = 0.95) -> Fit:
    """Weighted least squares ``T = α + β·s`` (weights 1/T²) with t-distribution intervals."""
    s, t = _prep(sizes, times)
    if np.unique(s).size < 2:
        raise ParioError("an α + β·s fit needs at least two different request sizes")
    X = np.column_stack([np.ones_like(s), s]) / t[:, None]
    y = np.ones_like(t)  # t / t
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    alpha, beta = float(coef[0]), float(coef[1])
    dof = s.size - 2
    res = y - X @ coef
    notes = []
    if dof > 0:
        sigma2 = float(res @ res) / dof
        cov = sigma2 * np.linalg.inv(X.T @ X)
        q = float(stats.t.ppf(0.5 + conf / 2, dof))
        da, db = q * math.sqrt(max(cov[0, 0], 0.0)), q * math.sqrt(max(cov[1, 1], 0.0))
    else:
        da = db = math.inf
        notes.append("no repetitions: confidence intervals unknown")
    rms, ws, wr = _residual_summary(s, t, lambda x: alpha + beta * x)
    if alpha < 0:
        notes.append(f"fitted α = {alpha:.3g} s < 0 (startup time below resolution)")
    if beta < 0:
        notes.append(f"fitted β = {beta:.3g} s/B < 0 (time does not grow with size)")
    return Fit("additive", alpha, beta, (alpha - da, alpha + da), (beta - db, beta + db), rms, ws, wr, int(s.size),
               conf, tuple(notes))


def fit_max(sizes, times, conf: float = 0.95) -> Fit:
    """Least squares ``T = max(α, β·s)``: the knee is searched over the gaps between sizes.

    For a split (sizes ≤ knee | sizes > knee) the weighted-LS solutions are closed form:
    α = Σ(1/T) / Σ(1/T²) over the lower part, β = Σ(s/T) / Σ(s²/T²) over the upper part;
    the split whose full max-model relative SSE is smallest wins.  Intervals are
    t-distribution intervals of the two conditional estimates.
    """
    s, t = _prep(sizes, times)
    u = np.unique(s)
    if u.size < 2:
        raise ParioError("a max(α, β·s) fit needs at least two different request sizes")
    best = None
    for k in range(1, u.size):
        lo, hi = s <= u[k - 1], s > u[k - 1]
        a = float(np.sum(1 / t[lo]) / np.sum(1 / t[lo] ** 2))
        b = float(np.sum(s[hi] / t[hi]) / np.sum((s[hi] / t[hi]) ** 2))
        sse = float(np.sum(((t - np.maximum(a, b * s)) / t) ** 2))
        if best is None or sse < best[0]:
            best = (sse, k, a, b, lo, hi)
    _, k, alpha, beta, lo, hi = best
    notes = []

    def interval(resid, w_sum, n):
        if n < 2:
            return math.inf
        sigma2 = float(np.sum(resid**2)) / (n - 1)
        return float(stats.t.ppf(0.5 + conf / 2, n - 1)) * math.sqrt(sigma2 / w_sum)

    da = interval((t[lo] - alpha) / t[lo], float(np.sum(1 / t[lo] ** 2)), int(lo.sum()))
    db = interval((t[hi] - beta * s[hi]) / t[hi], float(np.sum((s[hi] / t[hi]) ** 2)), int(hi.sum()))
    if k == u.size - 1:
        notes.append(f"β rests on the largest size only ({format_size(u[-1])}); add larger --sizes")
    if k == 1:
        notes.append(f"α rests on the smallest size only ({format_size(u[0])}); add smaller --sizes")
    rms, ws, wr = _residual_summary(s, t, lambda x: np.maximum(alpha, beta * x))
    return Fit("max", alpha, beta, (alpha - da, alpha + da), (beta - db, beta + db), rms, ws, wr, int(s.size), conf,
               tuple(notes))


def fit(sizes, times, model: str = "auto", conf: float = 0.95) -> Fit:
    """Fit ``model`` (``additive``, ``max`` or ``auto`` = the one with smaller residuals)."""
    if model == "additive":
        return fit_additive(sizes, times, conf)
    if model == "max":
        return fit_max(sizes, times, conf)
    if model != "auto":
        raise ParioError(f"unknown fit model {model!r} (choose from {', '.join(MODELS)})")
    a = fit_additive(sizes, times, conf)
    if np.unique(np.asarray(sizes)).size < 3:  # two sizes: both shapes fit exactly; keep the papers' one
        return a
    m = fit_max(sizes, times, conf)
    return m if m.rel_rms < a.rel_rms else a


def check(f: Fit, what: str, max_residual: float) -> None:
    """Refuse (ParioError) a fit whose per-size median residual is unreasonable.

    Negative estimates are not refused here (a startup time below the timer's resolution
    fits slightly negative); :func:`pario.calibrate.calibrate` clips them to 0 with a warning.
    """
    if not (f.rel_rms <= max_residual):
        raise ParioError(
            f"{what}: refusing the {f.model} fit: residuals of {100 * f.rel_rms:.0f} % RMS (worst at "
            f"{format_size(f.worst_size)}: {100 * f.worst_rel:+.0f} %) exceed the limit of {100 * max_residual:.0f} %; "
            "the timings are not repeatable or do not follow a startup + per-byte cost "
            "(check for other load, raise --reps/--min-time, or pass --max-residual)")


def combine_beta(fits: list[Fit]) -> float:
    """Inverse-variance weighted mean of several β estimates (plain mean if intervals unknown)."""
    b = np.array([f.beta for f in fits])
    half = np.array([(f.beta_ci[1] - f.beta_ci[0]) / 2 for f in fits])
    if np.all(np.isfinite(half)) and np.all(half > 0):
        w = 1 / half**2
        return float(np.sum(w * b) / np.sum(w))
    return float(np.mean(b))


def spread(sizes, times) -> tuple[float, int]:
    """Largest coefficient of variation over repetitions at one size, and that size."""
    s, t = _prep(sizes, times)
    u, inv = np.unique(s, return_inverse=True)
    worst, at = 0.0, int(u[0])
    for k in range(u.size):
        x = t[inv == k]
        if x.size > 1:
            cv = float(np.std(x, ddof=1) / np.mean(x))
            if cv > worst:
                worst, at = cv, int(u[k])
    return worst, at
