"""System profiles: built-ins load, values follow their documented sources, bad profiles fail in one line."""

import math

import pytest

from pario import ParioError
from pario.cli import main
from pario.system import System, builtin_names, load_system

EXPECTED = {  # name: (HServers, SServers, procs_per_node) from the papers' set-ups (docs/profiles.md)
    "ceda-hdd8": (8, 0, 2), "ceda-ssd4": (0, 4, 4), "padp-6h2s": (6, 2, 1), "psa-4h4s": (4, 4, 2),
    "hacio-6h2s": (6, 2, 2), "ci-layout-eth": (16, 0, 2), "ci-layout-ib": (8, 0, 8),
}


def test_builtins_are_the_papers_clusters():
    assert set(builtin_names()) == set(EXPECTED)
    for name, (h, s, ppn) in EXPECTED.items():
        sysp = load_system(name)
        assert (len(sysp.of_kind("hdd")), len(sysp.of_kind("ssd")), sysp.procs_per_node) == (h, s, ppn)


def test_ci_layout_table4_values():
    # seed 002 Table 4: e = 0.0003 s (Ethernet), 0.0002 s (IB); v = 1/120 MB and 1/1000 MB per s;
    # alpha 0.0003 s random, 0.0001 s sequential; beta = 1/120 MB per s.
    eth, ib = load_system("ci-layout-eth"), load_system("ci-layout-ib")
    assert eth.network.e == 0.0003 and ib.network.e == 0.0002
    assert eth.network.t == pytest.approx(1 / (120 * 2**20), rel=1e-3)
    assert ib.network.t == pytest.approx(1 / (1000 * 2**20), rel=1e-3)
    d = eth.servers[0]
    assert d.alpha_for(0, False) == 0.0003 and d.alpha_for(0, True) == 0.0001
    assert d.beta_for(0) == pytest.approx(1 / (120 * 2**20), rel=1e-3)


def test_psa_sserver_capacity_is_1gib():
    sysp = load_system("psa-4h4s")
    assert [s.capacity for s in sysp.servers if s.kind == "ssd"] == [2**30] * 4
    assert all(math.isfinite(s.capacity) for s in sysp.servers)


def test_per_op_fallbacks_and_tables(tmp_path):
    p = tmp_path / "p.toml"
    p.write_text('[network]\ne = 0.001\nt = 1e-9\n[clients]\nprocs_per_node = 3\n'
                 '[[server]]\nname = "A"\nkind = "ssd"\nalpha = 0.5\nbeta = 2.0\nbeta_write = 3.0\nalpha_read_rand = 0.7\n'
                 '[[server]]\nname = "B"\nkind = "hdd"\nalpha = 1\nbeta = 1\ncapacity = "2k"\ncost = "max"\n')
    sysp = load_system(p)
    assert sysp.cost_table().tolist() == [0, 1]      # additive by default, max where the profile says so
    a = sysp.alpha_table()
    assert a[0, 0, 0] == 0.7 and a[0, 0, 1] == 0.5 and a[0, 1, 0] == 0.5
    assert sysp.beta_table().tolist() == [[2.0, 3.0], [1.0, 1.0]]
    assert sysp.servers[1].capacity == 2048 and math.isinf(sysp.servers[0].capacity)
    # round trip through TOML
    q = tmp_path / "q.toml"
    q.write_text(sysp.to_toml())
    assert load_system(q).servers == sysp.servers


@pytest.mark.parametrize("text, key", [
    ("[network]\ne = 1\n[[server]]\nname='a'\nkind='hdd'\nalpha=1\nbeta=1\n", "'t'"),
    ("[network]\ne = 1\nt = 1\n[[server]]\nname='a'\nkind='tape'\nalpha=1\nbeta=1\n", "'kind'"),
    ("[network]\ne = 1\nt = 1\n[[server]]\nname='a'\nkind='hdd'\nalpha=-1\nbeta=1\n", "'alpha'"),
    ("[network]\ne = 1\nt = 1\n[[server]]\nname='a'\nkind='hdd'\nalpha=1\nbeta=1\ncapacity='lots'\n", "'capacity'"),
    ("[network]\ne = 1\nt = 1\n[[server]]\nname='a'\nkind='hdd'\nalpha=1\nbeta=1\nspeed=3\n", "'speed'"),
    ("[network]\ne = 1\nt = 1\n[[server]]\nname='a'\nkind='hdd'\nalpha=1\nbeta=1\ncost='sum'\n", "'cost'"),
    ("[network]\ne = 1\nt = 1\n[clients]\nprocs_per_node=0\n[[server]]\nname='a'\nkind='hdd'\nalpha=1\nbeta=1\n", "'procs_per_node'"),
    ("[network]\ne = 1\nt = 1\n", "server"),
    ("this is = not = toml", "TOML"),
])
def test_malformed_profile_names_the_key(tmp_path, capsys, text, key):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ParioError, match=key):
        load_system(p)
    assert main(["system", "show", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert key in err and "\n" not in err


def test_system_show_json(capsys):
    import json

    assert main(["system", "show", "hacio-6h2s", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in d["server"]] == ["H0", "H1", "H2", "H3", "H4", "H5", "S0", "S1"]
    assert System.from_dict(d).names == load_system("hacio-6h2s").names
