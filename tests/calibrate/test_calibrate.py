"""Calibration: least-squares fits on synthetic data with known α, β (independent oracles),
residual refusal, profile output, TCP network measurement, and a tiny O_DIRECT run."""

from __future__ import annotations

import argparse
import math
import os

import numpy as np
import pytest

from pario import ParioError
from pario.calibrate import fit as fitmod
from pario.calibrate.core import Target, calibrate, parse_target
from pario.calibrate.storage import check_sizes, measure_target
from pario.system import System, load_system

SIZES = np.array([4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 8 << 20], dtype=float)


def _synthetic(alpha, beta, shape, noise, reps=8, seed=1):
    rng = np.random.default_rng(seed)
    s = np.repeat(SIZES, reps)
    t = (alpha + beta * s) if shape == "additive" else np.maximum(alpha, beta * s)
    return s, t * (1 + noise * rng.standard_normal(s.size))


def test_additive_fit_recovers_known_alpha_beta_without_noise():
    alpha, beta = 3e-4, 1 / (120 * 2**20)
    s, t = _synthetic(alpha, beta, "additive", 0.0)
    f = fitmod.fit_additive(s, t)
    assert f.alpha == pytest.approx(alpha, rel=1e-9)
    assert f.beta == pytest.approx(beta, rel=1e-9)
    assert f.rel_rms < 1e-9


def test_additive_fit_matches_closed_form_two_point_solution():
    # two sizes: the line through the two points is the exact oracle
    s = np.array([4096.0, 1 << 20])
    t = np.array([0.0011, 0.0095])
    f = fitmod.fit_additive(s, t)
    b = (t[1] - t[0]) / (s[1] - s[0])
    assert f.beta == pytest.approx(b, rel=1e-9)
    assert f.alpha == pytest.approx(t[0] - b * s[0], rel=1e-9)


def test_additive_confidence_interval_covers_truth_at_nominal_rate():
    # Monte Carlo oracle: the 95 % interval must cover the true α about 95 % of the time
    alpha, beta = 2e-3, 1e-8
    cover_a = cover_b = 0
    trials = 300
    for k in range(trials):
        s, t = _synthetic(alpha, beta, "additive", 0.05, reps=4, seed=k)
        f = fitmod.fit_additive(s, t)
        cover_a += f.alpha_ci[0] <= alpha <= f.alpha_ci[1]
        cover_b += f.beta_ci[0] <= beta <= f.beta_ci[1]
    assert 0.88 <= cover_a / trials <= 0.99
    assert 0.88 <= cover_b / trials <= 0.99


def test_max_fit_recovers_throttle_asymptotes():
    iops, bps = 250, 120 * 2**20
    s, t = _synthetic(1 / iops, 1 / bps, "max", 0.03)
    f = fitmod.fit_max(s, t)
    assert f.alpha == pytest.approx(1 / iops, rel=0.03)
    assert f.beta == pytest.approx(1 / bps, rel=0.03)
    assert f.alpha_ci[0] < 1 / iops < f.alpha_ci[1]


def test_max_fit_equals_brute_force_least_squares():
    # oracle: grid search of the relative SSE of max(α, βs) over (α, β)
    s, t = _synthetic(1e-3, 1 / (200 * 2**20), "max", 0.05, reps=3, seed=7)
    f = fitmod.fit_max(s, t)

    def sse(a, b):
        return float(np.sum(((t - np.maximum(a, b * s)) / t) ** 2))

    A = np.linspace(0.8e-3, 1.2e-3, 201)
    B = np.linspace(0.8, 1.2, 201) / (200 * 2**20)
    grid = min(sse(a, b) for a in A for b in B)
    assert sse(f.alpha, f.beta) <= grid * (1 + 1e-6)


def test_auto_picks_the_shape_that_generated_the_data():
    assert fitmod.fit(*_synthetic(4e-3, 8e-9, "max", 0.02)).model == "max"
    assert fitmod.fit(*_synthetic(4e-3, 8e-9, "additive", 0.02)).model == "additive"


def test_check_refuses_unreasonable_residuals_with_one_clear_line():
    s = np.repeat(SIZES, 3)
    rng = np.random.default_rng(0)
    t = 1e-3 * np.exp(rng.uniform(-1.5, 1.5, s.size))  # no structure at all
    f = fitmod.fit(s, t)
    with pytest.raises(ParioError) as ei:
        fitmod.check(f, "H0 read rand", 0.25)
    msg = str(ei.value)
    assert "H0 read rand" in msg and "refusing" in msg and "\n" not in msg
    good = fitmod.fit(*_synthetic(1e-3, 1e-8, "additive", 0.02))
    fitmod.check(good, "ok", 0.25)  # does not raise


def test_spread_is_coefficient_of_variation_over_repetitions():
    s = np.array([4096, 4096, 4096, 65536, 65536, 65536], dtype=float)
    t = np.array([1.0, 1.0, 1.0, 1.0, 2.0, 3.0])
    cv, at = fitmod.spread(s, t)
    assert at == 65536
    assert cv == pytest.approx(np.std([1, 2, 3], ddof=1) / 2)


def test_combine_beta_inverse_variance():
    a = fitmod.Fit("additive", 0, 1.0, (0, 0), (0.9, 1.1), 0, 1, 0, 5)
    b = fitmod.Fit("additive", 0, 2.0, (0, 0), (1.8, 2.2), 0, 1, 0, 5)  # half width 0.2: weight 1/4
    assert fitmod.combine_beta([a, b]) == pytest.approx((1 * 100 + 2 * 25) / 125)


def test_check_sizes():
    assert check_sizes([8192, 4096, 4096]) == (4096, 8192)
    with pytest.raises(ParioError, match="multiples of 4096"):
        check_sizes([4096, 5000])
    with pytest.raises(ParioError, match="at least two"):
        check_sizes([4096])


def test_parse_target(tmp_path):
    t = parse_target(f"H0={tmp_path}:hdd")
    assert t == Target("H0", str(tmp_path), "hdd")
    assert parse_target(f"S0={tmp_path}:ssd").kind == "ssd"
    assert parse_target(f"X={tmp_path}").kind in ("hdd", "ssd")
    with pytest.raises(ParioError, match="NAME=PATH"):
        parse_target("nonsense")
    with pytest.raises(ParioError, match="not a directory"):
        parse_target(f"H0={tmp_path}/missing:hdd")


def test_tcp_network_measurement_is_positive_and_sane():
    from pario.calibrate.network import measure_tcp

    net, raw = measure_tcp(sizes=(1, 65536, 1 << 20), reps=5, connects=10)
    assert 0 < net.e < 0.05
    assert net.t > 0
    # the 1 MiB transfers took at least t * 1 MiB (the slope cannot exceed the slowest point)
    big = [x for n, x in zip(raw["size"], raw["seconds"]) if n == 1 << 20]
    assert net.t * (1 << 20) <= max(big)


def test_measure_and_calibrate_on_a_plain_directory(tmp_path):
    """A short real run on the tmp file system: plausible numbers and a loadable profile."""
    s, cap = measure_target("X", str(tmp_path), sizes=[4096, 65536], reps=2, min_time=0.01, file_size=1 << 20)
    assert cap > 0
    assert len(s.seconds) == 2 * 2 * 2 * 2
    assert all(x > 0 for x in s.seconds)
    cal = calibrate([Target("X", str(tmp_path), "ssd")], sizes=[4096, 65536, 262144], reps=2, min_time=0.01,
                    file_size=1 << 20, network="none", check=False)
    text = cal.system.to_toml()
    p = tmp_path / "p.toml"
    p.write_text(text)
    sys2 = load_system(p)
    assert isinstance(sys2, System) and sys2.names == ["X"]
    assert sys2.servers[0].kind == "ssd"
    assert 0 < sys2.servers[0].capacity < math.inf
    assert not any(n.startswith(".pario-calibrate") for n in os.listdir(tmp_path))  # scratch file removed


def test_calibrate_cli_registers_and_rejects_bad_target(tmp_path, capsys):
    from pario.cli import calibrate_cmd

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    calibrate_cmd.register(sub)
    args = parser.parse_args(["calibrate", "--target", "bad", "--network", "none"])
    with pytest.raises(ParioError, match="NAME=PATH"):
        args.func(args)
    out = tmp_path / "p.toml"
    args = parser.parse_args(["calibrate", "--target", f"X={tmp_path}:hdd", "--network", "none", "--sizes",
                              "4k,16k,64k", "--reps", "2", "--min-time", "0.01", "--file-size", "1m",
                              "--max-residual", "100", "-o", str(out)])
    assert args.func(args) == 0
    assert load_system(out).servers[0].name == "X"
