"""`pario layout map` against the arithmetic of round-robin striping."""

import json

import numpy as np

from pario.cli import main
from pario.trace import Trace, save


def test_layout_map_json_varied_stripes(tmp_path, capsys):
    # 8 ranks, one 512 KiB read each, aligned: under <28K, 100K> on 6H+2S one round is
    # 6*28K + 2*100K = 368K, so each 512K request spans rounds; total bytes per server must
    # follow the byte-count function: count the bytes of [0, 4 MiB) per server by hand.
    k = 1024
    off = np.arange(8) * 512 * k
    t = Trace.from_arrays(np.arange(8), None, ["read"] * 8, off, [512 * k] * 8)
    path = save(t, tmp_path / "t.csv")
    assert main(["layout", "map", str(path), "--system", "padp-6h2s", "--layout", "var:hdd=28k,ssd=100k", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["servers"]
    total = 8 * 512 * k
    W = 6 * 28 * k + 2 * 100 * k
    rounds, rest = divmod(total, W)
    stripes = [28 * k] * 6 + [100 * k] * 2
    want, pos = [], 0
    for w in stripes:
        want.append(rounds * w + min(max(rest - pos, 0), w))
        pos += w
    assert [got[n]["bytes"] for n in ["H0", "H1", "H2", "H3", "H4", "H5", "S0", "S1"]] == want
    assert sum(v["bytes"] for v in got.values()) == total


def test_layout_map_bad_layout_is_one_line(tmp_path, capsys):
    t = Trace.from_arrays([0], None, ["read"], [0], [10])
    path = save(t, tmp_path / "t.parquet")
    assert main(["layout", "map", str(path), "--system", "padp-6h2s", "--layout", "2d:3:64k"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be split" in err
