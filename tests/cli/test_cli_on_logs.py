"""Every foundation command works on every shared Darshan log (issue: 'Done when').

For each log: ``trace import`` → ``trace show --json`` → ``layout map --json``; the summary's
byte totals must equal the imported trace's, and the layout map must conserve bytes.
"""

from __future__ import annotations

import json

import pytest
from helpers import TRACES

from pario.cli import main
from pario.trace import load

LOGS = sorted(TRACES.glob("*.darshan")) + sorted(TRACES.glob("real/*.darshan"))

pytestmark = pytest.mark.skipif(not LOGS, reason="shared Darshan logs not available")


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_import_show_map(path, tmp_path, capsys):
    out = tmp_path / "t.parquet"
    assert main(["trace", "import", str(path), "-o", str(out)]) == 0
    capsys.readouterr()
    trace = load(out)
    assert main(["trace", "show", str(out), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["requests"], s["bytes_read"], s["bytes_written"]) == (len(trace), trace.bytes_read, trace.bytes_written)
    assert set(s["patterns"]) == {str(r) for r in set(trace.rank.tolist())}
    assert main(["layout", "map", str(out), "--system", "ceda-hdd8", "--layout", "fixed:64k", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["servers"]
    assert sum(v["bytes"] for v in m.values()) == int(trace.length.sum())
