"""RMT: interval cache against brute force, flag splitting, durability, corrupt file."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st_

from pario import ParioError
from pario.store.rmt import CLEAN, DIRTY, RMT, STALE, Entries


@settings(max_examples=60, deadline=None)
@given(st_.lists(st_.tuples(st_.integers(0, 1000), st_.integers(1, 200)), max_size=12),
       st_.lists(st_.tuples(st_.integers(0, 1300), st_.integers(1, 300)), min_size=1, max_size=20))
def test_interval_lookup_matches_brute_force(ents, reqs):
    rows = sorted((i, o, "r", o, n, 0) for i, (o, n) in enumerate(ents))
    rows.sort(key=lambda r: r[1])
    e = Entries.from_rows(rows)
    x = np.array([r[0] for r in reqs])
    end = x + np.array([r[1] for r in reqs])
    brute = [[k for k, r in enumerate(rows) if r[1] < b and r[1] + r[4] > a] for a, b in zip(x, end)]
    assert [e.hits(int(a), int(b)) for a, b in zip(x, end)] == [bool(b) for b in brute]
    assert e.hits_many(x, end).tolist() == [bool(b) for b in brute]
    assert [sorted(e.overlapping(int(a), int(b)).tolist()) for a, b in zip(x, end)] == brute


def test_mark_write_splits_and_persists(tmp_path):
    r = RMT(tmp_path / "rmt.db")
    r.add("f", "A", [0], [0], [100])
    r.add("f", "A", [100], [100], [50])          # merged with its contiguous predecessor
    r.add("f", "B", [50], [1000], [100])
    assert len(r.all_rows()) == 2
    assert r.mark_write("f", "A", 60, 80)
    # A: [0,60) clean, [60,80) dirty, [80,150) clean; B: [50,60) clean, [60,80) stale, [80,150) clean
    rows = {(rf, o, n): fl for _, _, o, rf, ro, n, fl in r.all_rows()}
    assert rows[("A", 60, 20)] == DIRTY and rows[("B", 60, 20)] == STALE
    assert rows[("A", 0, 60)] == CLEAN and rows[("A", 80, 70)] == CLEAN and rows[("B", 80, 70)] == CLEAN
    assert not r.mark_write("f", "A", 65, 75)     # already dirty there: no change, no commit
    b_rows = [x for x in r.all_rows() if x[3] == "B" and x[2] == 60]
    assert b_rows[0][4] == 1010                   # replica offset follows the split
    r.close()
    r2 = RMT(tmp_path / "rmt.db")                 # committed: survives reopening
    assert sorted(r2.files_with_unclean()) == ["f"]
    assert r2.entries("f").any_unclean
    r2.set_flag("f", "A", 0, 200, DIRTY, CLEAN)
    r2.set_flag("f", "B", 0, 200, STALE, CLEAN)
    r2.compact("f")
    assert sorted((rf, o, n) for _, _, o, rf, _, n, _ in r2.all_rows()) == [("A", 0, 150), ("B", 50, 100)]


def test_corrupt_rmt_is_one_line_error(tmp_path):
    p = tmp_path / "rmt.db"
    p.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ParioError, match="corrupt") as ei:
        RMT(p)
    assert "\n" not in str(ei.value)


@settings(max_examples=60, deadline=None)
@given(st_.lists(st_.tuples(st_.integers(0, 1000), st_.integers(1, 200)), max_size=80),
       st_.integers(0, 1300), st_.integers(1, 300))
def test_overlap_list_matches_overlapping(ents, x, n):
    rows = sorted(((i, o, "r", o, ln, 0) for i, (o, ln) in enumerate(ents)), key=lambda r: (r[1], r[0]))
    e = Entries.from_rows(rows)
    assert e.overlap_list(x, x + n) == e.overlapping(x, x + n).tolist()
