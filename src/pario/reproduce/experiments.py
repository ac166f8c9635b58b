"""The experiments of the five papers' evaluation sections (SPEC §5), one declarative
definition each.  Sizes in bytes.  ``scale`` says where pario runs a smaller workload than
the paper and by how much (the simulator's time per request is what limits it on a 2-core
machine); ``variant`` / ``variant_note`` document profile changes for parameters the
papers do not give.  The ``checks`` are the headline directions; ``expected=False``
marks a direction pario does not reproduce (explained in docs/RESULTS.md).
"""

from __future__ import annotations

from .core import Check, Experiment

K, M = 1 << 10, 1 << 20
RW = ("read", "write")

# Network t divided by 8 (≈ 1 GB/s on the wire) for the hybrid HDD/SSD papers: with the
# profiles' Gigabit t (= HDD β) an SServer's link is as slow as an HDD, so no layout can
# use the SSDs' speed and PADP's LPs correctly answer "equal stripes" (= DEF).  The papers
# do not give t; their SServers clearly were not link-bound (PADP puts 100 KB of every
# 128 KB… on them).  Documented in docs/RESULTS.md.
FAST_NET = {"t_div": 8}
FAST_NET_NOTE = ("network t = Gigabit t / 8: the papers give no t for their hybrid clusters; with t = HDD β an "
                 "SServer's link caps it at HDD speed and varied stripes cannot help")


def _ior(**kw):
    return {"gen": "ior", **kw}


CEDA = [
    Experiment(
        id="ceda-fig3", paper="CEDA", figure="Fig. 3", title="IOR strided vs sequential on 4 servers (motivation)",
        family="motivating", system="ceda-hdd8", variant={"servers": 4, "ppn": 1},
        variant_note="4 of the 8 HDD servers, one process per client node (§2.2)",
        workload=_ior(procs=4, block=4 * M + 64 * K, seed=1),
        cases=tuple({"x": f"{s >> 10}K", "xfer": s} for s in (4 * K, 8 * K, 16 * K, 32 * K, 64 * K)),
        quick={"block": 1 * M + 64 * K}, ops=("read",),
        scale="4 MiB + 64 KiB per process (paper: not stated); quick 1 MiB + 64 KiB",
        series=("strided", "sequential"), x_label="request size",
        paper_numbers={"strided vs sequential": "sequential faster at 4/8/16 KB, strided faster at 32/64 KB"},
        checks=(Check("strided", "sequential", ">", xs=("64K",), paper="strided faster"),
                Check("sequential", "strided", ">", xs=("4K", "8K", "16K"), paper="sequential faster"),
                Check("strided", "sequential", ">", xs=("32K",), paper="strided faster", expected=False,
                      note="32 KB: in the simulator the strided processes share a server with 32 KB gaps (random), "
                           "sequential still wins.")),
    ),
    Experiment(
        id="ceda-fig9", paper="CEDA", figure="Fig. 9", title="IOR random strided, 16 processes, request sizes",
        family="ceda", system="ceda-hdd8", workload=_ior(procs=16, block=32 * M, pattern="random", seed=1),
        cases=tuple({"x": f"{s >> 10}K", "xfer": s} for s in (16 * K, 64 * K, 256 * K)),
        quick={"block": 2 * M}, scale="32 MiB per process (paper 128 MB: 1/4); quick 2 MiB (1/64)",
        series=("CEDA", "ORIG", "CIDA"), x_label="request size",
        paper_numbers={"CEDA vs ORIG read": "+69.1 … +291.7 %", "CEDA vs ORIG write": "+57.3 … +171.2 %",
                       "CEDA vs CIDA": "up to +257.8 % read, +249.7 % write",
                       "CIDA vs ORIG at 64/256 KB": "up to −49.1 %"},
        checks=(Check("CEDA", "ORIG", ">", op="read", paper="+69.1 … +291.7 %"),
                Check("CEDA", "ORIG", ">", op="write", paper="+57.3 … +171.2 %"),
                Check("CEDA", "CIDA", ">", paper="up to +257.8 % / +249.7 %"),
                Check("CIDA (model)", "ORIG (model)", "<", xs=("64K", "256K"), paper="up to −49.1 %",
                      note="CIDA loses to ORIG at 64/256 KB under CEDA's cost model (the model CEDA plans with)."),
                Check("CIDA", "ORIG", "<", xs=("64K", "256K"), paper="up to −49.1 %", expected=False,
                      note="In the simulator CIDA's contiguous, evenly spread replica beats random ORIG at every "
                           "size: the simulator has no on-disk allocation effect that would make CIDA's larger "
                           "sequential runs interleave worse than ORIG's.")),
    ),
    Experiment(
        id="ceda-fig10", paper="CEDA", figure="Fig. 10", title="I/O time per server, IOR 64 KB (normalised to CEDA's min)",
        family="server_time", system="ceda-hdd8", workload=_ior(procs=16, block=32 * M, pattern="random", seed=1),
        cases=({"x": "64K", "xfer": 64 * K},), quick={"block": 2 * M}, ops=("read",),
        scale="32 MiB per process (1/4); quick 2 MiB", series=("CEDA", "ORIG", "CIDA"), x_label="server",
        y_label="I/O time / min CEDA server time",
        paper_numbers={"loads": "ORIG skewed; CIDA and CEDA even; CEDA least time"},
        checks=(Check("max-time ratio", rel="metric>=", value=1.0, paper="ORIG's busiest server > CEDA's"),),
    ),
    Experiment(
        id="ceda-fig11", paper="CEDA", figure="Fig. 11", title="IOR 64 KB, process counts",
        family="ceda", system="ceda-hdd8", workload=_ior(xfer=64 * K, block=16 * M, pattern="random", seed=1),
        cases=tuple({"x": p, "procs": p} for p in (8, 32, 128)), quick={"block": 1 * M},
        scale="16 MiB per process (paper 128 MB: 1/8); quick 1 MiB", series=("CEDA", "ORIG", "CIDA"),
        x_label="processes",
        paper_numbers={"CEDA vs ORIG read": "+98.1 / +119.9 / +121.7 %", "write": "+53.4 / +109.7 / +99.8 %"},
        checks=(Check("CEDA", "ORIG", ">", paper="+53.4 … +121.7 %"), Check("CEDA", "CIDA", ">", paper="+58.7 … +202.9 %")),
    ),
    Experiment(
        id="ceda-fig12", paper="CEDA", figure="Fig. 12", title="IOR 64 KB, server counts",
        family="ceda", system="ceda-hdd8", workload=_ior(procs=16, xfer=64 * K, block=16 * M, pattern="random", seed=1),
        cases=tuple({"x": n, "servers": n} for n in (2, 4, 8)), quick={"block": 1 * M},
        scale="16 MiB per process (1/8); quick 1 MiB", series=("CEDA", "ORIG", "CIDA"), x_label="servers",
        paper_numbers={"CEDA vs ORIG read": "+18.5 … +166.9 %", "write": "+62.9 … +171.2 %"},
        checks=(Check("CEDA", "ORIG", ">", paper="+18.5 … +171.2 %"), Check("CEDA", "CIDA", ">", paper="up to +257.8 %")),
    ),
    Experiment(
        id="ceda-fig13", paper="CEDA", figure="Fig. 13", title="HPIO 32 processes, 16 KB regions, spacing",
        family="ceda", system="ceda-hdd8", workload={"gen": "hpio", "procs": 32, "region_count": 1024, "region_size": 16 * K},
        cases=tuple({"x": f"{s >> 10}K", "region_spacing": s} for s in (1 * K, 2 * K, 4 * K, 8 * K)),
        quick={"region_count": 128}, scale="1024 regions (paper 4096: 1/4); quick 128",
        series=("CEDA", "ORIG", "CIDA"), x_label="region spacing",
        paper_numbers={"CEDA vs CIDA read": "+10.9 / +49.3 / +31.8 / +45.4 %"},
        checks=(Check("CEDA", "ORIG", ">", paper="CEDA best"), Check("CEDA", "CIDA", ">", paper="+10.9 … +49.3 %")),
    ),
    Experiment(
        id="ceda-fig14", paper="CEDA", figure="Fig. 14", title="BTIO class A simple, 4 servers",
        family="ceda", system="ceda-hdd8", variant={"servers": 4}, variant_note="file striped over 4 servers (§6.2.3)",
        workload={"gen": "btio", "cls": "A", "subtype": "simple", "niter": 5},
        cases=tuple({"x": p, "procs": p} for p in (4, 16, 64)), quick={"cls": "W"},
        scale="1 of BTIO's 40 dumps (niter = 5), class A; quick class W", series=("CEDA", "ORIG", "CIDA"),
        x_label="processes", paper_numbers={"CEDA vs ORIG": "+37.1 / +41.3 / +54.8 %"},
        checks=(Check("CEDA", "ORIG", ">", paper="+37.1 … +54.8 %"),),
    ),
    Experiment(
        id="ceda-fig16", paper="CEDA", figure="Fig. 16", title="IOR random on 4 SSD servers, 32 processes",
        family="ceda", system="ceda-ssd4", workload=_ior(procs=32, block=8 * M, pattern="random", seed=1),
        cases=tuple({"x": f"{s >> 10}K", "xfer": s} for s in (4 * K, 16 * K, 64 * K)), quick={"block": 512 * K},
        scale="8 MiB per process (paper 256 MB: 1/32); quick 512 KiB", series=("CEDA", "ORIG", "CIDA"),
        x_label="request size",
        paper_numbers={"CEDA vs ORIG": "up to +39.8 % read, +72.8 % write", "CEDA vs CIDA": "up to +7.5 % / +14.7 %"},
        checks=(Check("CEDA", "ORIG", ">", paper="up to +39.8 % / +72.8 %"),),
    ),
]

PSA_VAR = {**FAST_NET}
PSA = [
    Experiment(
        id="psa-fig7", paper="PSA", figure="Fig. 7", title="IOR 16 processes, 512 KB, 4H+4S, SServers limited",
        family="layout", system="psa-4h4s", variant=PSA_VAR, variant_note=FAST_NET_NOTE,
        workload=_ior(procs=16, xfer=512 * K, block=64 * M, seed=1, ssd_fraction=0.25),
        cases=({"x": "sequential", "pattern": "sequential"}, {"x": "random", "pattern": "random"}),
        quick={"block": 8 * M}, options={"planner": "psa"},
        scale="1 GiB file (paper 16 GB), SServers hold 1/4 of it (paper 4×1 GB of 16 GB); quick 128 MiB",
        series=("PSA", "DEF", "PA"), x_label="access pattern",
        paper_numbers={"PSA vs DEF": "up to +66.9 % read, +77.1 % write", "PSA vs PA": "up to +39.8 % / +29.7 %",
                       "stripes": "PSA <120K, 8K>, PA <28K, 100K>"},
        checks=(Check("PSA", "DEF", ">", paper="+66.9 % / +77.1 %"), Check("PSA", "PA", ">", paper="+39.8 % / +29.7 %")),
    ),
    Experiment(
        id="psa-fig8", paper="PSA", figure="Fig. 8", title="IOR random, process counts",
        family="layout", system="psa-4h4s", variant=PSA_VAR, variant_note=FAST_NET_NOTE,
        workload=_ior(xfer=512 * K, block=32 * M, pattern="random", seed=1, ssd_fraction=0.25),
        cases=tuple({"x": p, "procs": p, "block": (512 * M) // p} for p in (8, 32, 64)),
        quick={"cases": tuple({"x": p, "procs": p, "block": (64 * M) // p} for p in (8, 32, 64))},
        options={"planner": "psa"}, scale="512 MiB file; quick 64 MiB; SServers hold 1/4",
        series=("PSA", "DEF", "PA"), x_label="processes",
        paper_numbers={"PSA vs DEF read": "+62.8 / +59.5 / +36.7 %", "PSA vs PA read": "+36.2 / +41.9 / +27.1 %"},
        checks=(Check("PSA", "DEF", ">", paper="+36.7 … +74.3 %"), Check("PSA", "PA", ">", paper="+22.3 … +41.9 %")),
    ),
    Experiment(
        id="psa-fig9", paper="PSA", figure="Fig. 9", title="IOR random 16 processes, request sizes",
        family="layout", system="psa-4h4s", variant=PSA_VAR, variant_note=FAST_NET_NOTE,
        workload=_ior(procs=16, block=32 * M, pattern="random", seed=1, ssd_fraction=0.25),
        cases=tuple({"x": f"{s >> 10}K", "xfer": s} for s in (128 * K, 1024 * K)), quick={"block": 4 * M},
        options={"planner": "psa"}, scale="32 MiB per process; quick 4 MiB; SServers hold 1/4",
        series=("PSA", "DEF", "PA"), x_label="request size",
        paper_numbers={"PSA vs DEF": "up to +68.7 % read, +74.4 % write", "PSA vs PA": "up to +43.4 % / +38.9 %"},
        checks=(Check("PSA", "DEF", ">", paper="up to +74.4 %"), Check("PSA", "PA", ">", paper="up to +43.4 %")),
    ),
    Experiment(
        id="psa-fig10", paper="PSA", figure="Fig. 10", title="IOR 512 KB, server ratios",
        family="layout", system="psa-4h4s", variant=PSA_VAR, variant_note=FAST_NET_NOTE,
        workload=_ior(procs=16, xfer=512 * K, block=32 * M, pattern="random", seed=1, ssd_fraction=0.25),
        cases=({"x": "5:3", "ratio": (5, 3)}, {"x": "3:5", "ratio": (3, 5)}), quick={"block": 4 * M},
        options={"planner": "psa"}, scale="32 MiB per process; quick 4 MiB; ratio read as HServers:SServers",
        series=("PSA", "DEF", "PA"), x_label="HServers:SServers",
        paper_numbers={"5:3 PSA vs DEF": "+58.6 % read, +68.2 % write", "5:3 PSA vs PA": "+35.3 % / +28.6 %"},
        checks=(Check("PSA", "DEF", ">", paper="+58.6 % / +68.2 %"), Check("PSA", "PA", ">", paper="+35.3 % / +28.6 %")),
    ),
    Experiment(
        id="psa-fig11", paper="PSA", figure="Fig. 11", title="HPIO 32 processes, region sizes, SServers hold 1/3",
        family="layout", system="psa-4h4s", variant=PSA_VAR, variant_note=FAST_NET_NOTE,
        workload={"gen": "hpio", "procs": 32, "region_count": 64, "region_spacing": 0, "ssd_fraction": 1 / 3},
        cases=tuple({"x": f"{s >> 10}K", "region_size": s} for s in (64 * K, 256 * K, 512 * K)),
        quick={"region_count": 16}, options={"planner": "psa"},
        scale="64 regions per process (paper 1024: 1/16); quick 16", series=("PSA", "DEF", "PA"),
        x_label="region size",
        paper_numbers={"PSA vs DEF read": "+59.4 / +64.5 / +51.8 %", "PSA vs PA read": "+33.2 / +25.1 / +19.2 %"},
        checks=(Check("PSA", "DEF", ">", paper="+51.8 … +64.5 %"), Check("PSA", "PA", ">", paper="+19.2 … +33.2 %")),
    ),
    Experiment(
        id="psa-fig12", paper="PSA", figure="Fig. 12", title="MPI-Tile-IO 8×8 elements of 32 KB, collective, SServers hold 1/4",
        family="layout", system="psa-4h4s", variant=PSA_VAR, variant_note=FAST_NET_NOTE,
        workload={"gen": "tile", "elements_x": 8, "elements_y": 8, "element_size": 32 * K, "ssd_fraction": 0.25},
        cases=({"x": 100, "tiles_x": 10, "tiles_y": 10}, {"x": 200, "tiles_x": 20, "tiles_y": 10},
               {"x": 400, "tiles_x": 20, "tiles_y": 20}),
        quick={"cases": ({"x": 100, "tiles_x": 10, "tiles_y": 10}, {"x": 200, "tiles_x": 20, "tiles_y": 10})},
        options={"planner": "psa", "collective": True}, scale="paper size; quick 100 and 200 processes only",
        series=("PSA", "DEF", "PA"), x_label="processes",
        paper_numbers={"PSA vs DEF read": "+41.9 / +38.2 / +34.1 %", "PSA vs PA read": "+28.2 / +30.8 / +27.9 %"},
        checks=(Check("PSA", "DEF", ">", paper="+34.1 … +59.2 %"), Check("PSA", "PA", ">", paper="+26.9 … +32.2 %")),
    ),
    Experiment(
        id="psa-fig13", paper="PSA", figure="Fig. 13", title="BTIO class C full, 6H+2S, SServers 0.5 GB",
        family="layout", system="psa-4h4s", variant={**PSA_VAR, "ratio": (6, 2)}, variant_note=FAST_NET_NOTE + "; 6H+2S",
        workload={"gen": "btio", "cls": "C", "subtype": "full", "niter": 5, "ssd_fraction": 1 / 6.64},
        cases=tuple({"x": p, "procs": p} for p in (4, 16, 64)), quick={"cls": "A", "cases": ({"x": 4, "procs": 4}, {"x": 16, "procs": 16})},
        options={"planner": "psa", "collective": True},
        scale="1 of 40 dumps (niter = 5), SServers hold 1/6.64 of it (paper 2×0.5 GB of 6.64 GB); quick class A, 4/16",
        series=("PSA", "DEF", "PA"), x_label="processes",
        paper_numbers={"PSA vs DEF": "+66.1 / +47.7 / +53.7 %", "PSA vs PA": "up to +38.9 %"},
        checks=(Check("PSA", "DEF", ">", paper="+47.7 … +66.1 %"), Check("PSA", "PA", ">", paper="up to +38.9 %")),
    ),
]

PADP_VAR = {**FAST_NET}
# §4.1 says "by default six HServers and two SServers", but the stripe pairs the paper reports
# satisfy its own eq. 1 (m·h + n·s = r) only with 4 HServers + 4 SServers: 4·28 + 4·100 =
# 512 KB for all four Fig. 4 pairs, and Fig. 7's <0 KB, 32 KB> for 128 KB "on the four
# SServers" (6·28 + 2·100 = 368 KB).  Fig. 5 (servers 0–5 HServers) and Fig. 8 (5:3, 3:5)
# state their configuration and keep it.
PADP_4H4S_NOTE = ("4H+4S: the paper's Fig. 4 pairs (<28K,100K> …) and Fig. 7's <0K,32K> on 'the four SServers' "
                  "satisfy eq. 1 only with 4 HServers + 4 SServers, not the 6H+2S of §4.1")
PADP = [
    Experiment(
        id="padp-fig4", paper="PADP", figure="Fig. 4", title="IOR 8 processes, 512 KB, 4H+4S, I/O modes",
        family="layout", system="padp-6h2s", variant={**PADP_VAR, "ratio": (4, 4)},
        variant_note=FAST_NET_NOTE + "; " + PADP_4H4S_NOTE,
        workload=_ior(procs=8, xfer=512 * K, block=64 * M, seed=1),
        cases=({"x": "sequential", "pattern": "sequential"}, {"x": "random", "pattern": "random"}),
        quick={"block": 8 * M}, options={"planner": "padp"},
        scale="64 MiB per process (paper 10 GB file: 1/20); quick 8 MiB",
        series=("PADP", "DEF", "RANDOM1", "RANDOM2"), x_label="access pattern",
        paper_numbers={"PADP vs DEF": "up to +149.2 % read, +271.8 % write",
                       "PADP vs RANDOM": "up to +80.6 % read, +357.1 % write",
                       "stripes": "<28K,100K> <20K,108K> <24K,104K> <36K,92K>"},
        checks=(Check("PADP", "DEF", ">", paper="up to +149.2 % / +271.8 %"),
                Check("PADP", "RANDOM1", ">", paper="up to +80.6 % / +357.1 %"),
                Check("PADP", "RANDOM2", ">", paper="up to +80.6 % / +357.1 %")),
    ),
    Experiment(
        id="padp-fig5", paper="PADP", figure="Fig. 5", title="I/O time per server, sequential read (normalised to PADP's min)",
        family="server_time", system="padp-6h2s", variant=PADP_VAR, variant_note=FAST_NET_NOTE,
        workload=_ior(procs=8, xfer=512 * K, block=64 * M, pattern="sequential", seed=1),
        cases=({"x": "seq read"},), quick={"block": 8 * M}, ops=("read",),
        scale="64 MiB per process; quick 8 MiB", series=("PADP", "DEF", "RANDOM1", "RANDOM2"), x_label="server",
        y_label="I/O time / min PADP server time",
        paper_numbers={"loads": "DEF/RANDOM skewed between HServers and SServers, PADP even"},
        checks=(Check("imbalance ratio", rel="metric>=", value=1.5, paper="DEF much more skewed than PADP"),),
    ),
    Experiment(
        id="padp-fig6", paper="PADP", figure="Fig. 6", title="IOR random, process counts",
        family="layout", system="padp-6h2s", variant=PADP_VAR, variant_note=FAST_NET_NOTE,
        workload=_ior(xfer=512 * K, pattern="random", seed=1),
        cases=tuple({"x": p, "procs": p, "block": (512 * M) // p} for p in (4, 32, 64)),
        quick={"cases": tuple({"x": p, "procs": p, "block": (64 * M) // p} for p in (4, 32, 64))},
        options={"planner": "padp"}, scale="512 MiB file; quick 64 MiB",
        series=("PADP", "DEF", "RANDOM1", "RANDOM2"), x_label="processes",
        paper_numbers={"PADP vs DEF read": "+60.8 / +146.3 / +118.4 %", "write": "+182.3 / +257.8 / +202.7 %"},
        checks=(Check("PADP", "DEF", ">", paper="+60.8 … +257.8 %"), Check("PADP", "RANDOM1", ">", paper="up to +228.8 %")),
    ),
    Experiment(
        id="padp-fig7", paper="PADP", figure="Fig. 7", title="IOR random 16 processes, 128 KB and 2048 KB, 4H+4S",
        family="layout", system="padp-6h2s", variant={**PADP_VAR, "ratio": (4, 4)},
        variant_note=FAST_NET_NOTE + "; " + PADP_4H4S_NOTE,
        workload=_ior(procs=16, block=32 * M, pattern="random", seed=1),
        cases=tuple({"x": f"{s >> 10}K", "xfer": s} for s in (128 * K, 2048 * K)), quick={"block": 4 * M},
        options={"planner": "padp"}, scale="32 MiB per process; quick 4 MiB",
        series=("PADP", "DEF", "RANDOM1", "RANDOM2"), x_label="request size",
        paper_numbers={"PADP vs DEF": "up to +76.3 % read, +127.9 % write", "128 KB stripes": "<0K, 32K> (4 SServers)"},
        checks=(Check("PADP", "DEF", ">", xs=("2048K",), paper="up to +127.9 %"),
                Check("PADP", "DEF", ">", xs=("128K",), paper="up to +127.9 %", expected=False,
                      note="128 KB: PADP's LPs choose the paper's <0K, 32K> (4 SServers), but in the simulator "
                           "every request then opens 4 connections on the 4 SServer links (e = 0.3 ms each) while "
                           "DEF's 64 KB stripes touch 2 of 8 servers per request; PADP's model (assumption 3: every "
                           "request involves every server) charges DEF the same p·e, so it cannot see this.")),
    ),
    Experiment(
        id="padp-fig8", paper="PADP", figure="Fig. 8", title="IOR 512 KB, server ratios 5:3 and 3:5",
        family="layout", system="padp-6h2s", variant=PADP_VAR, variant_note=FAST_NET_NOTE,
        workload=_ior(procs=8, xfer=512 * K, block=32 * M, pattern="random", seed=1),
        cases=({"x": "5:3", "ratio": (5, 3)}, {"x": "3:5", "ratio": (3, 5)}), quick={"block": 4 * M},
        options={"planner": "padp"}, scale="32 MiB per process; quick 4 MiB",
        series=("PADP", "DEF", "RANDOM1", "RANDOM2"), x_label="HServers:SServers",
        paper_numbers={"5:3 PADP vs DEF": "up to +100.9 % read, +154.1 % write"},
        checks=(Check("PADP", "DEF", ">", paper="up to +154.1 %"),),
    ),
]

HACIO = [
    Experiment(
        id="hacio-tables1-3", paper="HACIO", figure="Tables 1–3", title="worked example: 2 aggregators, H0 S0 H1 S1",
        family="hacio_example", system="hacio-6h2s", ops=("write",), series=("HACIO", "ROMCIO", "CACIO"),
        x_label="table", y_label="total time (T)",
        paper_numbers={"ROMCIO": "24T", "CACIO": "20T", "HACIO": "12T"},
        checks=(Check("ROMCIO total (T)", rel="metric==", value=24, paper="24T"),
                Check("CACIO total (T)", rel="metric==", value=20, paper="20T"),
                Check("HACIO total (T)", rel="metric==", value=12, paper="12T")),
    ),
    Experiment(
        id="hacio-fig8", paper="HACIO", figure="Fig. 8", title="IOR 32 processes, 256 KB, 4 MB buffer, 6H+2S",
        family="collective", system="hacio-6h2s",
        workload=_ior(procs=32, xfer=256 * K, seed=1),
        cases=({"x": "interleaved", "pattern": "strided", "block": 256 * K, "segments": 64},
               {"x": "random", "pattern": "random", "block": 16 * M}),
        quick={"cases": ({"x": "interleaved", "pattern": "strided", "block": 256 * K, "segments": 16},
                         {"x": "random", "pattern": "random", "block": 4 * M})},
        scale="512 MiB file (paper 16 GB: 1/32); quick 128 MiB", series=("HACIO", "ROMCIO", "CACIO"),
        x_label="access pattern",
        paper_numbers={"HACIO vs ROMCIO": "up to +58.5 % read, +61.1 % write", "HACIO vs CACIO": "up to +23.6 % / +39.3 %"},
        checks=(Check("HACIO", "ROMCIO", ">", paper="up to +58.5 % / +61.1 %", expected=False,
                      note="With a 4 MB buffer and 16 aggregators every ROMCIO cycle puts 512 KB of every "
                           "aggregator on every server: balanced, it attains the busiest-server bound of the paper's "
                           "own cycle model; HACIO's HServer-only cycles put 2–3 aggregators' 4 MB on each HServer, "
                           "then all 16 meet on the SServers, so it cannot be faster (tests "
                           "test_collective_cost_lower_bound_and_balanced_romcio, "
                           "test_hacio_vs_cacio_in_seed004_cycle_model; hacio-fig11 shows the 1 MB buffer where it "
                           "wins)."),
                Check("HACIO", "CACIO", ">", paper="up to +23.6 % / +39.3 %", expected=False,
                      note="CACIO is balanced here (test_hacio_vs_cacio_in_seed004_cycle_model)."),
                Check("CACIO", "ROMCIO", ">", xs=("interleaved",), paper="CACIO exceeds ROMCIO"),
                Check("CACIO", "ROMCIO", ">", xs=("random",), paper="CACIO exceeds ROMCIO", expected=False,
                      note="random: a tie (quick −1.1 … +0.4 %, full +0.6 … +0.7 %): random 256 KB pieces leave "
                           "ROMCIO's cycles as balanced as CACIO's.")),
    ),
    Experiment(
        id="hacio-fig9", paper="HACIO", figure="Fig. 9", title="IOR interleaved, request sizes",
        family="collective", system="hacio-6h2s", workload=_ior(procs=32, pattern="strided", seed=1),
        cases=tuple({"x": f"{s >> 10}K", "xfer": s, "block": s, "segments": (512 * M) // (32 * s)}
                    for s in (32 * K, 256 * K, 1024 * K)),
        quick={"cases": tuple({"x": f"{s >> 10}K", "xfer": s, "block": s, "segments": (64 * M) // (32 * s)}
                              for s in (32 * K, 256 * K, 1024 * K))},
        scale="512 MiB file (1/32); quick 64 MiB", series=("HACIO", "ROMCIO", "CACIO"), x_label="request size",
        paper_numbers={"HACIO vs others": "+197.7 % / +260.6 % at 32 KB, +46.8 % / +56.9 % at 1024 KB"},
        checks=(Check("HACIO", "ROMCIO", ">", paper="+46.8 … +260.6 %", expected=False,
                      note="4 MB buffer: see hacio-fig8."),),
    ),
    Experiment(
        id="hacio-fig10", paper="HACIO", figure="Fig. 10", title="IOR interleaved 256 KB, process counts",
        family="collective", system="hacio-6h2s", workload=_ior(xfer=256 * K, block=256 * K, pattern="strided", seed=1),
        cases=tuple({"x": p, "procs": p, "segments": (512 * M) // (p * 256 * K)} for p in (16, 64, 128)),
        quick={"cases": tuple({"x": p, "procs": p, "segments": (64 * M) // (p * 256 * K)} for p in (16, 64, 128))},
        scale="512 MiB file; quick 64 MiB", series=("HACIO", "ROMCIO", "CACIO"), x_label="processes",
        paper_numbers={"HACIO read": "+12.5 / +26.1 / +39.4 %", "write": "+13.1 / +24.4 / +47.8 %"},
        checks=(Check("HACIO", "ROMCIO", ">", paper="+12.5 … +47.8 %", expected=False, note="4 MB buffer: see hacio-fig8."),),
    ),
    Experiment(
        id="hacio-fig11", paper="HACIO", figure="Fig. 11", title="IOR interleaved 256 KB, collective buffer sizes",
        family="collective", system="hacio-6h2s", workload=_ior(procs=32, xfer=256 * K, block=256 * K, pattern="strided",
                                                                 segments=64, seed=1),
        cases=tuple({"x": f"{b >> 20}M", "buffer": b} for b in (1 * M, 2 * M, 4 * M, 8 * M)),
        quick={"segments": 16}, scale="512 MiB file; quick 128 MiB", series=("HACIO", "ROMCIO", "CACIO"),
        x_label="collective buffer",
        paper_numbers={"HACIO": "best at every buffer size 1–8 MB"},
        checks=(Check("HACIO", "ROMCIO", ">", xs=("1M", "2M"), paper="HACIO best"),
                Check("HACIO", "ROMCIO", ">", xs=("4M", "8M"), paper="HACIO best", expected=False,
                      note="Large buffers: see hacio-fig8."),
                Check("HACIO", "CACIO", ">", paper="HACIO best; its improvement over CACIO persists", expected=False,
                      note="CACIO (one server's data per aggregator per cycle, 2 aggregators per server) is balanced "
                           "at every buffer size here; HACIO's HServer-only cycles put 3 aggregators on the busiest "
                           "HServer (test_hacio_vs_cacio_in_seed004_cycle_model).")),
    ),
    Experiment(
        id="hacio-fig12", paper="HACIO", figure="Fig. 12", title="IOR interleaved 256 KB, server ratios 7:1 and 4:4",
        family="collective", system="hacio-6h2s", workload=_ior(procs=32, xfer=256 * K, block=256 * K, pattern="strided",
                                                                 segments=64, seed=1),
        cases=({"x": "7:1", "ratio": (7, 1)}, {"x": "4:4", "ratio": (4, 4)}), quick={"segments": 16},
        scale="512 MiB file; quick 128 MiB", series=("HACIO", "ROMCIO", "CACIO"), x_label="HServers:SServers",
        paper_numbers={"7:1": "HACIO ≈ CACIO", "4:4": "HACIO large improvement"},
        checks=(Check("HACIO", "CACIO", "≈", xs=("7:1",), tol=0.10, paper="≈ (marginal gap)", expected=False,
                      note="16 aggregators rotated over 7 HServers put 3 on the busiest HServer in every HServer "
                           "cycle, CACIO puts 2 on every server; the paper's own cycle model gives HACIO ≈ 30 % "
                           "slower here whatever the network (test_hacio_vs_cacio_in_seed004_cycle_model)."),
                Check("HACIO", "CACIO", ">", xs=("4:4",), paper="large improvement", expected=False,
                      note="4 MB buffer: see hacio-fig8.")),
    ),
    Experiment(
        id="hacio-fig13", paper="HACIO", figure="Fig. 13", title="HPIO 16 processes, 64 KB regions, spacing",
        family="collective", system="hacio-6h2s",
        workload={"gen": "hpio", "procs": 16, "region_count": 512, "region_size": 64 * K},
        cases=tuple({"x": f"{s >> 10}K", "region_spacing": s} for s in (4 * K, 8 * K, 16 * K, 32 * K)),
        quick={"region_count": 64}, scale="512 regions (paper 8192: 1/16); quick 64",
        series=("HACIO", "ROMCIO", "CACIO"), x_label="region spacing",
        paper_numbers={"HACIO read": "+23.9 / +18.8 / +19.3 / +17.5 %"},
        checks=(Check("HACIO", "ROMCIO", ">", paper="+17.5 … +23.9 %", expected=False, note="4 MB buffer: see hacio-fig8."),),
    ),
    Experiment(
        id="hacio-fig14", paper="HACIO", figure="Fig. 14", title="BTIO class C full, 4 MB buffer",
        family="collective", system="hacio-6h2s", workload={"gen": "btio", "cls": "C", "subtype": "full", "niter": 5},
        cases=tuple({"x": p, "procs": p} for p in (16, 36, 64)),
        quick={"cls": "A", "cases": ({"x": 16, "procs": 16}, {"x": 36, "procs": 36})},
        scale="1 of 40 dumps (niter = 5); quick class A, 16/36", series=("HACIO", "ROMCIO", "CACIO"),
        x_label="processes", paper_numbers={"HACIO vs ROMCIO": "+49.6 / +51.6 / +60.3 %"},
        checks=(Check("HACIO", "ROMCIO", ">", paper="+49.6 … +60.3 %", expected=False, note="4 MB buffer: see hacio-fig8."),),
    ),
]

CI_ETH = ("ci-layout-eth", (1, 2, 4, 8, 16, 32, 48, 96))
CI_IB = ("ci-layout-ib", (1, 2, 4, 8, 16, 32, 64))
CI_SIZES = tuple(4 * K << k for k in range(11))  # 4 KB … 4 MB
CI = [
    Experiment(
        id="ci-table5", paper="CI-LAYOUT", figure="Table 5", title="model accuracy: is the model's layout the fastest?",
        family="ci_accuracy", system="ci-layout-eth",
        workload={"profiles": (CI_ETH, CI_IB), "patterns": ("random", "sequential"), "sizes": CI_SIZES, "nreq": 16},
        quick={"nreq": 4}, ops=("write",),
        scale="16 requests per process (paper: 64 MB files); quick 4; grid = the paper's §6.4 process counts × 4 KB…4 MB",
        series=("correct",), x_label="case", y_label="model choice = simulator's best (1/0)",
        paper_numbers={"Ethernet random": "90.98 %", "Ethernet sequential": "88.14 %", "InfiniBand random": "84.86 %",
                       "InfiniBand sequential": "80.14 %"},
        checks=(Check("min accuracy", rel="metric>=", value=0.80, paper="80.14 … 90.98 %"),),
    ),
    Experiment(
        id="ci-fig5", paper="CI-LAYOUT", figure="Fig. 5", title="best layout per (processes, request size), sequential",
        family="ci_accuracy", system="ci-layout-eth",
        workload={"profiles": (CI_ETH, CI_IB), "patterns": ("sequential",), "sizes": CI_SIZES, "nreq": 16},
        quick={"nreq": 4}, ops=("write",), scale="as ci-table5", series=("correct",), x_label="case",
        y_label="model choice = simulator's best (1/0)",
        paper_numbers={"pattern": "1-DV for small requests and many processes, 1-DH for few processes and large "
                                  "requests, 2-D in between"},
        checks=(Check("accuracy", rel="metric>=", value=0.80, paper="most cases"),),
    ),
    Experiment(
        id="ci-fig6", paper="CI-LAYOUT", figure="Fig. 6", title="layout by overall cost, mixed IOR scenarios",
        family="ci_mixed", system="ci-layout-eth", options={"mode": "overall"},
        workload={"profiles": (CI_ETH, CI_IB), "patterns": ("random", "sequential"), "sizes": CI_SIZES, "nreq": 16,
                  "scenarios": 5, "instances": (6, 10), "seed": 6},
        quick={"nreq": 4, "scenarios": 2}, ops=("",),
        scale="5 scenarios per network × pattern (paper 10, IOR + Tile-IO; here IOR only), 16 requests per process",
        series=("Cost", "1-DV", "2-D"), x_label="scenario", y_label="improvement over 1-DH (%)",
        paper_numbers={"Cost vs 1-DH": "up to +57 % (Ethernet), +35 % (InfiniBand)"},
        checks=(Check("max gain over 1-DH %", rel="metric>=", value=0.0, paper="up to +57 %"),
                Check("Cost best fraction", rel="metric>=", value=1.0, paper="Cost best", expected=False,
                      note="one layout for a whole mixed scenario, chosen by Σ model cost: wrong when the model "
                           "misjudges the dominant instances.")),
    ),
    Experiment(
        id="ci-fig7", paper="CI-LAYOUT", figure="Fig. 7", title="hybrid replication (cheapest replica per instance), IOR",
        family="ci_mixed", system="ci-layout-eth", options={"mode": "dynamic"},
        workload={"profiles": (CI_ETH, CI_IB), "patterns": ("random", "sequential"), "sizes": CI_SIZES, "nreq": 16,
                  "scenarios": 5, "instances": (6, 10), "seed": 7},
        quick={"nreq": 4, "scenarios": 2}, ops=("",),
        scale="5 scenarios of 6–10 IOR instances per network × pattern, 16 requests per process",
        series=("Cost", "1-DV", "2-D"), x_label="scenario", y_label="improvement over 1-DH (%)",
        paper_numbers={"Cost vs the static layouts": "+20 … +74 %"},
        checks=(Check("Cost best fraction", rel="metric>=", value=1.0, paper="Cost best in every case (+20 … +74 %)",
                      expected=False, note="Cost = the model's choice per instance; where the model picks the wrong "
                                           "layout (≈ 15 % of instances, ci-table5) a static layout can win."),
                Check("max gain over 1-DH %", rel="metric>=", value=0.0, paper="up to +74 %")),
    ),
    Experiment(
        id="ci-fig8", paper="CI-LAYOUT", figure="Fig. 8", title="MPI-Tile-IO from 16 KB / 256 KB / 4 MB replicas",
        family="hybrid_tile", system="ci-layout-eth",
        workload={"gen": "tile", "element_size": 1024, "elements_x": 32, "elements_y": 32, "modes": (False, True)},
        cases=({"x": 4, "tiles_x": 2, "tiles_y": 2}, {"x": 16, "tiles_x": 4, "tiles_y": 4},
               {"x": 64, "tiles_x": 8, "tiles_y": 8}, {"x": 256, "tiles_x": 16, "tiles_y": 16}),
        quick={"cases": ({"x": 4, "tiles_x": 2, "tiles_y": 2}, {"x": 16, "tiles_x": 4, "tiles_y": 4})},
        scale="1 MB tiles (32 rows × 32 KB); paper 1–4 MB tiles, 4…256 processes; quick 4 and 16",
        series=("Cost", "256K", "4096K"), x_label="processes", y_label="improvement over the 16 KB replica (%)",
        paper_numbers={"Cost vs static": "+13 … +23 %"}, ops=("independent", "collective"),
        checks=(Check("Cost best fraction", rel="metric>=", value=1.0, paper="+13 … +23 % over every static replica",
                      expected=False, note="Cost = the CI-LAYOUT model's cheapest replica per request (§3, as the "
                                           "paper): it picks 256 KB for every request; that is the simulator's best "
                                           "in 5 of 8 cases (quick 3 of 4); 16 KB wins at 16 processes independent, "
                                           "4 MB in collective mode at 64/256 processes. No mixed routing beats the "
                                           "best static replica: a Tile-IO run has one request size."),),
    ),
]

EXPERIMENTS = {e.id: e for e in CEDA + PSA + PADP + HACIO + CI}

# Headlines the simulator does not reproduce at --quick scale (asserted as *not* expected;
# the reasons are in docs/RESULTS.md).  Keyed by (experiment id, check index).
_NOT_REPRODUCED = {
    ("ceda-fig9", 3): "the distribution model prices CIDA ≈ ORIG at 64/256 KB (−4 … +2 %), not clearly worse",
    ("ceda-fig10", 0): "simulated ORIG server loads are not more skewed than CEDA's at this size",
    ("ceda-fig11", 0): "CEDA < ORIG at 128 processes in the quick run (few requests per pattern)",
    ("ceda-fig11", 1): "CEDA ≈ CIDA at the quick size",
    ("ceda-fig12", 1): "CEDA = CIDA on 2 servers",
    ("ceda-fig16", 0): "SSD: α is tiny, replication gains ≈ 0 % in the simulator (paper +39.8 %)",
    **{(f"psa-fig{k}", i): "PSA ≈ DEF ≈ PA: every layout that fills the SServers puts the same bytes and "
                           "the same number of sub-requests on the HServers (conservation; the paper's own "
                           "model ties too); see RESULTS.md"
       for k in (7, 8, 9, 10, 11, 12, 13) for i in (0, 1) if (k, i) not in ((10, 0), (12, 1))},
}


# Non-reproductions the paper's *own* model proves (the test that proves it): PSA's search is
# flat once the SServers are filled (conservation of HServer bytes and sub-requests); with a
# 4 MB buffer and 16 aggregators ROMCIO and CACIO attain the busiest-server bound of seed 004's
# own cycle model, which HACIO cannot beat (an independent brute force of that model).
PSA_FLAT = "tests/plan/test_psa.py::test_search_is_flat_once_sservers_are_filled"
HACIO_CYCLE = "tests/simulate/test_simulate.py::test_hacio_vs_cacio_in_seed004_cycle_model"
_PROOF = {
    **{(f"psa-fig{k}", i): PSA_FLAT for k in (7, 8, 9, 10, 11, 12, 13) for i in (0, 1) if (k, i) != (12, 1)},
    ("hacio-fig8", 0): HACIO_CYCLE, ("hacio-fig8", 1): HACIO_CYCLE, ("hacio-fig9", 0): HACIO_CYCLE,
    ("hacio-fig10", 0): HACIO_CYCLE, ("hacio-fig11", 1): HACIO_CYCLE, ("hacio-fig11", 2): HACIO_CYCLE,
    ("hacio-fig12", 0): HACIO_CYCLE, ("hacio-fig12", 1): HACIO_CYCLE, ("hacio-fig13", 0): HACIO_CYCLE,
    ("hacio-fig14", 0): HACIO_CYCLE,
}


# Directions that hold at the quick size and not at full size, where the proof applies
_QUICK_ONLY = {
    ("psa-fig10", 0): "holds at the quick size (+0.1 … +5.6 %), ties at full size (+0.0 %): once the SServers are "
                      "filled every layout puts the same bytes and sub-requests on the HServers",
}


def _apply_known() -> None:
    import dataclasses

    for k, e in list(EXPERIMENTS.items()):
        checks = list(e.checks)
        for i, c in enumerate(checks):
            note = _NOT_REPRODUCED.get((k, i))
            if note is not None:
                c = checks[i] = dataclasses.replace(c, expected=False, note=c.note or note)
            proof = _PROOF.get((k, i))
            if proof is not None:
                c = checks[i] = dataclasses.replace(c, proof=proof)
            if (k, i) in _QUICK_ONLY:
                checks[i] = dataclasses.replace(c, expected="quick", note=c.note or _QUICK_ONLY[(k, i)])
        EXPERIMENTS[k] = dataclasses.replace(e, checks=tuple(checks))


_apply_known()
