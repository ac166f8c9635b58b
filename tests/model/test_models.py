"""Cost models: batching, CEDA distribution model, CI-LAYOUT closed forms, PADP/PSA terms."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pario.cli import main
from pario.layout import Striped
from pario.model import (CILayoutModel, DistributionModel, HybridModel, batch_ids, ci_layout_cost,
                         classic_layouts, heterogeneous_cost, homogeneous_cost, split)
from pario.system import Network, Server, System, load_system
from pario.trace import Trace, save

KiB = 1024


def reads(rank, offset, length, **kw):
    n = len(rank)
    return Trace.from_arrays(rank, None, np.zeros(n, dtype=np.int8), offset, length, **kw)


def two_server_system(alpha=0.01, beta=1e-6, **extra):
    servers = tuple(Server(f"D{i}", "hdd", alpha=alpha, beta=beta, **extra) for i in range(2))
    return System("two", servers, Network(e=0.001, t=1e-7), procs_per_node=1)


# ---------------------------------------------------------------------------- batches
def test_batches_by_time_follow_interval_overlap():
    #          [0,1) [0.5,2) [2,3) [2,2.5) [5,5) [5,5) [6,7)
    start = [0.0, 0.5, 2.0, 2.0, 5.0, 5.0, 6.0]
    end = [1.0, 2.0, 3.0, 2.5, 5.0, 5.0, 7.0]
    t = reads(np.arange(7), np.zeros(7), np.ones(7), start=start, end=end)
    assert batch_ids(t, "time").tolist() == [0, 0, 1, 1, 2, 2, 3]
    assert batch_ids(t).tolist() == [0, 0, 1, 1, 2, 2, 3]  # auto = time when all starts known


def test_batches_by_order_lockstep_and_auto_without_times():
    rank = [0, 0, 0, 1, 1, 2]
    t = reads(rank, np.arange(6) * 10, np.full(6, 10), order=[5, 7, 9, 0, 3, 2])  # sparse orders
    assert batch_ids(t, "order").tolist() == [0, 1, 2, 0, 1, 0]
    assert batch_ids(t).tolist() == [0, 1, 2, 0, 1, 0]
    assert [len(b) for b in split(t)] == [3, 2, 1]


# ---------------------------------------------------------------------------- distribution model
def test_distribution_model_hand_computed_cases():
    sys2 = two_server_system()  # α = 0.01 everywhere, no explicit sequential α → contiguous costs 0 (paper)
    lay = Striped.fixed(4 * KiB, (0, 1))
    m = DistributionModel()
    # A: one process, [0,8K) then [8K,16K): each server gets two contiguous 4K pieces → k = 1
    a = m.trace_cost(reads([0, 0], [0, 8 * KiB], [8 * KiB, 8 * KiB]), lay, sys2, by="all")
    assert a.predicted_s == pytest.approx(0.01 + 8192e-6)
    assert a.servers == pytest.approx([0.01 + 8192e-6] * 2)
    # B: two processes on both servers: ½(p+q)α = 2α per server
    b = m.trace_cost(reads([0, 1], [0, 8 * KiB], [8 * KiB, 8 * KiB]), lay, sys2, by="all")
    assert b.predicted_s == pytest.approx(0.02 + 8192e-6)
    # C: uneven: S0 has r0's blocks 0 and 2 (contiguous locally, p = 1, k = 1);
    #    S1 has r0's block 1 and r1's 2K of block 3 (p = 2, q = 2)
    c = m.trace_cost(reads([0, 1], [0, 12 * KiB], [12 * KiB, 2 * KiB]), lay, sys2, by="all")
    assert c.servers == pytest.approx([0.01 + 8192e-6, 0.02 + 6144e-6])
    assert c.predicted_s == pytest.approx(0.02 + 6144e-6)


def test_distribution_model_rate_limited_server_takes_the_larger_of_its_terms():
    """A server whose profile says ``cost = "max"`` (the testbed's token bucket: requests at
    1/α per second, bytes at 1/β) passes a batch of q sub-requests and B bytes in
    max(T_s, T_t) = max(q·α, B·β); the additive server beside it keeps eq. 3's T_s + T_t."""
    servers = (Server("D0", "hdd", alpha=0.01, beta=1e-6, cost="max"), Server("D1", "hdd", alpha=0.01, beta=1e-6))
    sys2 = System("mixed", servers, Network(e=0.001, t=1e-7), procs_per_node=1)
    lay = Striped.fixed(4 * KiB, (0, 1))
    m = DistributionModel()
    # four ranks, one 8 KiB request each: every server gets 4 pieces of 4 KiB from 4 ranks
    # (p = q = 4: ½(p+q) = 4 seeks): T_s = 0.04, T_t = 16384e-6 = 0.016384
    t = reads([0, 1, 2, 3], np.arange(4) * 8 * KiB, np.full(4, 8 * KiB))
    c = m.trace_cost(t, lay, sys2, by="all")
    assert c.servers == pytest.approx([0.04, 0.04 + 16384e-6])
    # one 1 MiB request: transfer-bound, 512 KiB per server: T_s = 0.01, T_t = 524288e-6
    big = m.trace_cost(reads([0], [0], [1 << 20]), lay, sys2, by="all")
    assert big.servers == pytest.approx([524288e-6, 0.01 + 524288e-6])
    assert big.predicted_s == pytest.approx(0.01 + 524288e-6)


def test_distribution_model_sequential_alpha_and_paper_mode():
    sys2 = two_server_system(alpha_read_seq=0.001, alpha_read_rand=0.01)
    lay = Striped.fixed(4 * KiB, (0, 1))
    t = reads([0, 0], [0, 8 * KiB], [8 * KiB, 8 * KiB])
    # profile gives a sequential α: the contiguous piece pays it
    assert DistributionModel().trace_cost(t, lay, sys2, by="all").predicted_s == pytest.approx(0.011 + 8192e-6)
    assert DistributionModel(contiguous_alpha="zero").trace_cost(t, lay, sys2, by="all").predicted_s == \
        pytest.approx(0.01 + 8192e-6)
    # p > 1: ½(p+q) seeks at α_rand, ½(q−p) at α_seq: 3 procs, 5 sub-requests on one server
    one = System("one", (Server("D0", "hdd", alpha=0.01, beta=0.0, alpha_read_seq=0.001, alpha_read_rand=0.01),),
                 Network(0, 0))
    t5 = reads([0, 0, 1, 1, 2], np.arange(5) * 100, np.full(5, 10))
    got = DistributionModel().trace_cost(t5, Striped.fixed(4096, (0,)), one, by="all").predicted_s
    assert got == pytest.approx(0.5 * (3 + 5) * 0.01 + 0.5 * (5 - 3) * 0.001)


def _eq2_corrected(o, l, stripe, n):
    """CEDA seed 000 eq. 2 with b = str − (o mod str) (SPEC §2.3): bytes of [o, o+l) per server."""
    out = [0] * n
    first, last = o // stripe, (o + l - 1) // stripe
    if first == last:
        out[first % n] += l
        return out
    b = stripe - (o % stripe)
    e = (o + l) - last * stripe
    out[first % n] += b
    out[last % n] += e
    for blk in range(first + 1, last):
        out[blk % n] += stripe
    return out


def test_distribution_transfer_term_matches_corrected_eq2():
    rng = np.random.default_rng(7)
    n, stripe = 5, 3000
    off = rng.integers(0, 10**6, 200)
    ln = rng.integers(1, 40000, 200)
    sysn = System("b", tuple(Server(f"D{i}", "hdd", alpha=0.0, beta=1.0) for i in range(n)), Network(0, 0))
    cost = DistributionModel().trace_cost(reads(np.zeros(200), off, ln), Striped.fixed(stripe, range(n)), sysn,
                                          by="all")
    expect = np.sum([_eq2_corrected(int(o), int(l), stripe, n) for o, l in zip(off, ln)], axis=0)
    assert cost.servers == pytest.approx(expect)  # α = 0, β = 1: per-server time = bytes


def test_vectorised_trace_cost_equals_sum_of_batch_costs():
    rng = np.random.default_rng(3)
    sysx = load_system("padp-6h2s")
    n = 300
    t = Trace.from_arrays(rng.integers(0, 6, n), rng.integers(0, 2, n), rng.integers(0, 2, n).astype(np.int8),
                          rng.permutation(n) * (4 << 20), rng.integers(1, 1 << 18, n), files=("a", "b"))
    # requests 4 MiB apart: no sub-request continues one of an earlier batch, so batches are
    # independent and the whole-trace evaluation must equal the sum of per-batch evaluations
    lay = {"a": Striped.fixed(64 * KiB, range(8)), "b": Striped((0, 1, 6), (32 * KiB, 0, 96 * KiB))}
    m = DistributionModel()
    whole = m.trace_cost(t, lay, sysx)
    parts = [m.batch_cost(b, lay, sysx) for b in split(t)]
    assert whole.batches == len(parts)
    assert whole.predicted_s == pytest.approx(sum(p.predicted_s for p in parts))
    assert whole.servers == pytest.approx(np.sum([p.servers for p in parts], axis=0))
    assert m.request_costs(t, lay, sysx).sum() == pytest.approx(whole.predicted_s)


def test_contiguity_carries_across_batches():
    # one rank streams [0,4K), [4K,8K) on one server in two batches: the second piece continues
    # the first in server-local space, so only the first one seeks (k = 1 over the trace)
    one = System("one", (Server("D0", "hdd", alpha=0.01, beta=0.0),), Network(0, 0))
    t = reads([0, 0], [0, 4 * KiB], [4 * KiB, 4 * KiB])
    lay = Striped.fixed(4 * KiB, (0,))
    assert DistributionModel().trace_cost(t, lay, one, by="order").predicted_s == pytest.approx(0.01)
    assert DistributionModel().trace_cost(t, lay, one, by="request").batches == 2


def test_distribution_network_extension():
    sys2 = two_server_system()
    lay = Striped.fixed(4 * KiB, (0, 1))
    t = reads([0, 1], [0, 8 * KiB], [8 * KiB, 8 * KiB])
    base = DistributionModel().trace_cost(t, lay, sys2, by="all").servers
    net = DistributionModel(network=True).trace_cost(t, lay, sys2, by="all").servers
    assert net - base == pytest.approx([2 * 0.001 + 8192 * 1e-7] * 2)  # p·e + bytes·t per server


# ---------------------------------------------------------------------------- CI-LAYOUT
def test_ci_layout_formula_hand_value():
    # p = 8, s = 64K, n = 16, g = 4, m = 2, Ethernet values of seed 002 Table 4
    e, v, a, b = 0.0003, 7.947e-9, 0.0003, 7.947e-9
    got = ci_layout_cost(8, 64 * KiB, 16, 4, 2, e, v, a, b)
    T_e = max(2 * 16 / 4, 8 / 4) * e
    T_x = max(2 * 65536, 2 * 65536 * 4 / 16) * v
    T_st = 2 * (a + 16384 * b)
    assert got["T_e"] == pytest.approx(T_e)
    assert got["T_x"] == pytest.approx(T_x)
    assert got["T"] == pytest.approx(T_e + T_x + T_st)


@pytest.mark.parametrize("p", [1, 3, 8, 16, 40])
@pytest.mark.parametrize("name", ["1-DH", "1-DV", "2-D"])
def test_ci_layout_storage_term_equals_distribution_model(p, name):
    """On a uniform pattern (p processes, one aligned request of size s each, one batch) the
    distribution model's max server time is exactly ⌈p/g⌉(α + s·g/n·β): each of the busiest
    group's servers sees q = ⌈p/g⌉ sub-requests from as many processes, so ½(p+q)α = ⌈p/g⌉α
    (and k = 1 for p = 1), with s·g/n bytes each.  So the tolerance is float round-off."""
    sysx = load_system("ci-layout-eth")
    s = 64 * KiB
    lay = classic_layouts(sysx, s, groups=4)[name]
    t = reads(np.arange(p), np.arange(p) * s, np.full(p, s))
    dist = DistributionModel().trace_cost(t, lay, sysx)
    ci = CILayoutModel(pattern="random").trace_cost(t, lay, sysx)
    assert dist.predicted_s == pytest.approx(ci.details["T_st"], rel=1e-12)
    # T by hand (SPEC §2.1 reconstruction), in units of e = α = 0.0003 s and b = v = β = 7.947e-9 s/B:
    # T = (coefficient of e)·e + (bytes)·b, with g = 1 / 4 / 16 for 1-DH / 2-D / 1-DV and m = min(2, p).
    e, b = 0.0003, 7.947e-9
    coef_e, nbytes = _CI_HAND[(p, name)]
    assert ci.predicted_s == pytest.approx(coef_e * e + nbytes * b, rel=1e-12)


# Hand derivation for s = 64 KiB = 65536 B on n = 16 servers, q = ⌈p/g⌉, sub-request s·g/n:
#   T_e = max(m·16/g, q)·e,  T_x = max(m·65536, q·65536·g/16)·b,  T_s + T_rw = q·(e + (65536·g/16)·b)
_CI_HAND = {
    # p = 1, m = 1
    (1, "1-DH"): (17, 69632),   # q=1: T_e 16e; T_x max(65536, 4096)=65536 b; T_st e + 4096 b
    (1, "2-D"): (5, 81920),     # q=1: T_e 4e;  T_x 65536 b;                   T_st e + 16384 b
    (1, "1-DV"): (2, 131072),   # q=1: T_e 1e;  T_x 65536 b;                   T_st e + 65536 b
    # p = 3, m = 2
    (3, "1-DH"): (35, 143360),  # q=3: T_e max(32,3)=32e; T_x max(131072, 12288)=131072 b; T_st 3e + 12288 b
    (3, "2-D"): (9, 147456),    # q=1: T_e max(8,1)=8e;   T_x 131072 b;                    T_st e + 16384 b
    (3, "1-DV"): (3, 196608),   # q=1: T_e max(2,1)=2e;   T_x 131072 b;                    T_st e + 65536 b
    # p = 8, m = 2
    (8, "1-DH"): (40, 163840),  # q=8: T_e max(32,8)=32e; T_x max(131072, 32768)=131072 b; T_st 8e + 32768 b
    (8, "2-D"): (10, 163840),   # q=2: T_e max(8,2)=8e;   T_x max(131072, 32768)=131072 b; T_st 2e + 32768 b
    (8, "1-DV"): (3, 196608),   # q=1: T_e 2e;            T_x 131072 b;                    T_st e + 65536 b
    # p = 16, m = 2
    (16, "1-DH"): (48, 196608),  # q=16: T_e max(32,16)=32e; T_x max(131072, 65536)=131072 b; T_st 16e + 65536 b
    (16, "2-D"): (12, 196608),   # q=4:  T_e max(8,4)=8e;    T_x 131072 b;                    T_st 4e + 65536 b
    (16, "1-DV"): (3, 196608),   # q=1:  T_e 2e;             T_x 131072 b;                    T_st e + 65536 b
    # p = 40, m = 2: the ⌈p/g⌉ branch of both maxima
    (40, "1-DH"): (80, 327680),  # q=40: T_e max(32,40)=40e; T_x max(131072, 163840)=163840 b; T_st 40e + 163840 b
    (40, "2-D"): (20, 327680),   # q=10: T_e max(8,10)=10e;  T_x max(131072, 163840)=163840 b; T_st 10e + 163840 b
    (40, "1-DV"): (6, 393216),   # q=3:  T_e max(2,3)=3e;    T_x max(131072, 196608)=196608 b; T_st 3e + 196608 b
}


def test_ci_layout_many_processes_prefer_1dv_and_one_large_request_prefers_1dh():
    sysx = load_system("ci-layout-eth")
    m = CILayoutModel(pattern="random")
    s = 4 << 20
    many = reads(np.arange(96), np.arange(96) * s, np.full(96, s))
    costs = {k: m.trace_cost(many, lay, sysx).predicted_s for k, lay in classic_layouts(sysx, s).items()}
    assert min(costs, key=costs.get) == "1-DV"
    one = reads([0], [0], [s])
    costs = {k: m.trace_cost(one, lay, sysx).predicted_s for k, lay in classic_layouts(sysx, s).items()}
    assert min(costs, key=costs.get) == "1-DH"


# ---------------------------------------------------------------------------- PADP / PSA terms
def test_hybrid_tables_3_and_4_hand_values():
    e, t = 0.0003, 1e-8
    ah, bh, as_, bs = 0.004, 2e-8, 0.0001, 4e-9
    het = heterogeneous_cost(16, 2, 4, 4, 96 * KiB, 32 * KiB, 512 * KiB, e, t, ah, bh, as_, bs)
    assert het["T_e"] == pytest.approx(max(2 * 8, 16) * e)
    assert het["T_x"] == pytest.approx(16 * 96 * KiB * t)  # the p·h·t term wins: three-term max
    assert het["T"] == pytest.approx(16 * e + 16 * 96 * KiB * t + 16 * max(ah + 96 * KiB * bh, as_ + 32 * KiB * bs))
    two = heterogeneous_cost(16, 2, 4, 4, 96 * KiB, 32 * KiB, 512 * KiB, e, t, ah, bh, as_, bs, three_term=False)
    assert two["T_x"] == pytest.approx(max(2 * 512 * KiB, 16 * 32 * KiB) * t)  # PADP eq. 3 as printed
    hom = homogeneous_cost(16, 2, 4, 512 * KiB, e, t, ah, bh)
    assert hom["T_e"] == pytest.approx(max(2 * 4, 16) * e)
    assert hom["T_x"] == pytest.approx(max(2 * 512 * KiB, 16 * 512 * KiB / 4) * t)
    assert hom["T_st"] == pytest.approx(16 * ah + 16 * 128 * KiB * bh)
    # the SServer term dominates (above the HServer term did, so β_s was not exercised):
    # p = 8, c = 2, m = n = 4, h = 50000, s = 200000, S = 1e6, e = 1 ms, t = 1e-8,
    # α_h = 5 ms, β_h = 1e-7, α_s = 0.5 ms, β_s = 6e-8
    #   T_e = max(2·8, 8)·0.001 = 0.016;  T_x = max(2·1e6, 8·5e4, 8·2e5)·1e-8 = 0.02
    #   HServer 0.005 + 5e4·1e-7 = 0.010 < SServer 0.0005 + 2e5·6e-8 = 0.0125 → T_st = 8·0.0125 = 0.1
    ss = heterogeneous_cost(8, 2, 4, 4, 50_000, 200_000, 1_000_000, 0.001, 1e-8, 0.005, 1e-7, 0.0005, 6e-8)
    assert ss["T_e"] == pytest.approx(0.016)
    assert ss["T_x"] == pytest.approx(0.02)
    assert ss["T_st"] == pytest.approx(0.1)
    assert ss["T"] == pytest.approx(0.136)


def _hybrid_round_system() -> System:
    """4 HServers (α_h = 5 ms, β_h = 1e-7 s/B) + 4 SServers (α_s = 0.5 ms, β_s = 6e-8 s/B),
    e = 1 ms, t = 1e-8 s/B, 2 processes per client node: round numbers for hand arithmetic."""
    hs = tuple(Server(f"H{i}", "hdd", alpha=0.005, beta=1e-7) for i in range(4))
    ss = tuple(Server(f"S{i}", "ssd", alpha=0.0005, beta=6e-8) for i in range(4))
    return System("h4s4-round", hs + ss, Network(e=0.001, t=1e-8), procs_per_node=2)


@pytest.mark.parametrize("h, s, expect", [
    # SServer term dominates: p = 8, c = 2, m = n = 4, S = 4·50000 + 4·200000 = 1e6 B
    #   T_e = max(2·8, 8)·1 ms = 0.016;  T_x = max(2·1e6, 8·5e4, 8·2e5)·1e-8 = 0.02
    #   HServer 0.005 + 5e4·1e-7 = 0.010;  SServer 0.0005 + 2e5·6e-8 = 0.0125 → T_st = 8·0.0125 = 0.1
    #   T = 0.016 + 0.02 + 0.1 = 0.136   (with β_h in the SServer term it would be 0.2)
    (50_000, 200_000, 0.136),
    # HServer term dominates: HServer 0.005 + 2e5·1e-7 = 0.025, SServer 0.0005 + 5e4·6e-8 = 0.0035
    #   T_x = max(0.02, 8·2e5·1e-8 = 0.016, 0.004) = 0.02;  T = 0.016 + 0.02 + 8·0.025 = 0.236
    (200_000, 50_000, 0.236),
])
def test_hybrid_model_on_uniform_batch_equals_table_3(h, s, expect):
    """One batch of p = 8 requests of S = 1e6 B (one per rank) on ⟨h, s⟩: HybridModel prices the
    batch at Σ_i T_i / p = T of PSA Table 3, here derived by hand."""
    sysx = _hybrid_round_system()
    S, p = 4 * h + 4 * s, 8
    assert S == 1_000_000
    t = reads(np.arange(p), np.arange(p) * S, np.full(p, S))
    lay = Striped(tuple(range(8)), (h,) * 4 + (s,) * 4)
    got = HybridModel(pattern="random").trace_cost(t, lay, sysx)
    assert got.batches == 1
    assert got.predicted_s == pytest.approx(expect, rel=1e-12)


# ---------------------------------------------------------------------------- CLI
def test_cli_model_json(tmp_path, capsys):
    p = 4
    t = reads(np.arange(p), np.arange(p) * 65536, np.full(p, 65536))
    path = tmp_path / "t.csv"
    save(t, path)
    rc = main(["model", str(path), "--system", "ceda-hdd8", "--layout", "fixed:64K", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    sysx = load_system("ceda-hdd8")
    expect = DistributionModel().trace_cost(t, Striped.fixed(65536, range(8)), sysx)
    assert out["predicted_s"] == pytest.approx(expect.predicted_s)
    assert set(out["servers"]) == set(sysx.names)
    assert sum(out["servers"].values()) == pytest.approx(float(expect.servers.sum()))
    assert main(["model", str(path), "--system", "ceda-hdd8", "--layout", "nope"]) == 2
