"""The compiled pass of the spatial pattern identifier (CEDA seed 000 §4.2, numba).

:func:`pario.trace.patterns.segment` defines streams, transitions, blocks, runs and the
stream kinds (see that module's docstring).  :func:`walk` computes them in one pass over the
requests in stream order, block by block: a block (maximal sequence of transitions with the
same template) is scanned to its end, then its requests are labelled — a request joins the
regular block of its incoming transition, else that of its outgoing one, else none — so
nothing per block or per transition is stored; per stream and per run only.  The kernel is
run once; the tables are trimmed by the caller.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# RUN_KINDS codes, as in pario.trace.patterns
R_CONTIG, R_STRIDED, R_REPEATED, R_RANDOM = range(4)


@njit(cache=True)
def walk(rows, rank, file, op, off, ln, by_op, min_run, run_of_pos):
    """Streams and runs of the requests ``rows`` (in stream order), in one pass.

    Returns (number of streams, number of runs, and the tables — their first entries: per
    stream (first position, requests, bytes, min and max length, number of blocks, the
    first block's RUN_KINDS code and distance, runs, requests in regular runs); per run
    (stream, kind code, stride, first position, requests, bytes)); and the run id of every
    position in ``run_of_pos`` (when it has ``len(rows)`` entries).  The tables are made as
    long as the requests (at most a stream or a run each; only the pages written take
    memory) and never grown: a loop that may rebind an array is compiled far slower, as are
    calls to helpers with array arguments (none here)."""
    n = len(rows)
    ns_cap = n
    nr_cap = n
    s_first = np.empty(ns_cap, dtype=np.int64)
    s_count = np.empty(ns_cap, dtype=np.int64)
    s_bytes = np.empty(ns_cap, dtype=np.int64)
    s_lmin = np.empty(ns_cap, dtype=np.int64)
    s_lmax = np.empty(ns_cap, dtype=np.int64)
    s_nblocks = np.empty(ns_cap, dtype=np.int64)
    s_b0kind = np.empty(ns_cap, dtype=np.int8)
    s_b0stride = np.empty(ns_cap, dtype=np.int64)
    s_nruns = np.empty(ns_cap, dtype=np.int64)
    s_regular = np.empty(ns_cap, dtype=np.int64)
    r_stream = np.empty(nr_cap, dtype=np.int64)
    r_kind = np.empty(nr_cap, dtype=np.int8)
    r_stride = np.empty(nr_cap, dtype=np.int64)
    r_first = np.empty(nr_cap, dtype=np.int64)
    r_req = np.empty(nr_cap, dtype=np.int64)
    r_bytes = np.empty(nr_cap, dtype=np.int64)
    per_pos = len(run_of_pos) == n
    ns = 0
    nr = 0
    a = 0
    while a < n:
        b = a + 1
        ra = rows[a]
        while b < n:  # the stream: same rank, file (and op)
            r = rows[b]
            if rank[r] != rank[ra] or file[r] != file[ra] or (by_op and op[r] != op[ra]):
                break
            b += 1
        cnt = b - a
        s = ns
        ns += 1
        s_first[s] = a
        s_count[s] = cnt
        lmin = ln[rows[a]]
        lmax = lmin
        tot = 0
        for p in range(a, b):
            x = ln[rows[p]]
            tot += x
            lmin = min(lmin, x)
            lmax = max(lmax, x)
        s_bytes[s] = tot
        s_lmin[s] = lmin
        s_lmax[s] = lmax
        # ---- blocks and labels; a label is a block number (-1: irregular)
        prev_label = -2
        nblocks = 0
        regular = 0
        b0_kind = R_CONTIG
        b0_stride = 0
        prev_blk = -1
        prev_reg = False
        prev_kind = R_RANDOM
        prev_stride = 0
        t0 = a
        first_run = nr
        p_next = a  # next position to label
        while p_next < b:
            if cnt == 1:
                blk, reg, kind, stride, t1 = -1, False, R_RANDOM, 0, a
            else:
                # transition (contiguous?, template distance) from position t to t + 1
                r, q = rows[t0], rows[t0 + 1]
                c0 = off[q] - (off[r] + ln[r]) == 0
                d0 = 0 if c0 else off[q] - off[r]
                t1 = t0 + 1
                while t1 <= b - 2:
                    r, q = rows[t1], rows[t1 + 1]
                    c1 = off[q] - (off[r] + ln[r]) == 0
                    d1 = 0 if c1 else off[q] - off[r]
                    if c1 != c0 or d1 != d0:
                        break
                    t1 += 1
                L = t1 - t0
                blk = nblocks
                nblocks += 1
                reg = L >= min_run or L == cnt - 1
                kind = R_CONTIG if c0 else (R_REPEATED if d0 == 0 else R_STRIDED)
                stride = d0
                if blk == 0:
                    b0_kind, b0_stride = kind, stride
            # label positions t0 .. (t1 if it ends the stream else t1 - 1)
            last = t1 if t1 == b - 1 else t1 - 1
            for p in range(p_next, last + 1):
                if p == t0 and t0 > a and prev_reg:
                    lab, lk, lst = prev_blk, prev_kind, prev_stride
                elif reg:
                    lab, lk, lst = blk, kind, stride
                else:
                    lab, lk, lst = -1, R_RANDOM, 0
                if lab >= 0:
                    regular += 1
                if p == a or lab != prev_label:  # a new run
                    r_stream[nr] = s
                    r_kind[nr] = R_CONTIG if cnt == 1 else lk
                    r_stride[nr] = lst if lk == R_STRIDED else 0
                    r_first[nr] = p - a
                    r_req[nr] = 0
                    r_bytes[nr] = 0
                    nr += 1
                    prev_label = lab
                r_req[nr - 1] += 1
                r_bytes[nr - 1] += ln[rows[p]]
                if per_pos:
                    run_of_pos[p] = nr - 1
            p_next = last + 1
            prev_blk, prev_reg, prev_kind, prev_stride = blk, reg, kind, stride
            t0 = t1
        s_nruns[s] = nr - first_run
        s_regular[s] = regular
        s_nblocks[s] = nblocks
        s_b0kind[s] = b0_kind
        s_b0stride[s] = b0_stride
        a = b
    return (ns, nr, s_first, s_count, s_bytes, s_lmin, s_lmax, s_nblocks, s_b0kind, s_b0stride, s_nruns,
            s_regular, r_stream, r_kind, r_stride, r_first, r_req, r_bytes)
