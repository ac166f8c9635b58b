import numpy as np
from hypothesis import given, strategies as st

from pario.arrays import unique


@given(st.lists(st.integers(-50, 50), max_size=200))
def test_unique_equals_numpy(values):
    x = np.array(values, dtype=np.int64)
    u, inv, cnt = unique(x, return_inverse=True, return_counts=True)
    nu, ninv, ncnt = np.unique(x, return_inverse=True, return_counts=True)
    assert u.tolist() == nu.tolist() and cnt.tolist() == ncnt.tolist()
    assert inv.tolist() == ninv.ravel().tolist()
    assert (u[inv] == x).all() if len(x) else True
