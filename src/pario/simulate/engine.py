"""The compiled event core of the simulator (numba).

The model (see ``docs/simulator.md``) has three kinds of FIFO resources: one network link
per client node, one network link per server, and one storage device per server.

- A transfer (the data of a sub-request, or a data-exchange message) of ``s`` bytes takes
  ``e + s·t`` seconds on the sender's link and then the same on the receiver's link, which
  starts receiving no earlier than the sender starts sending (cut-through: an uncontended
  transfer takes ``e + s·t``, and a link's busy time is the sum of its transfers, so seed
  003 eq. 3's ``max{c·r·t, p·s·t}`` arises from contention, not from a formula).
- A device serves a sub-request in ``α(op, seq) + s·β(op)`` (profile ``cost = "additive"``,
  the papers' model), or ``max(α, s·β)`` for a server whose profile says ``cost = "max"``
  (a rate-limited device: the testbed's blkio throttle, as ``pario calibrate`` detects).  An HDD tracks its head: the
  sub-request is sequential (``α_seq``) when it starts at the byte where the previous one
  served by that device ended, in the same data object, else random (``α_rand``).
- A write crosses the network first, then the device; a read is served by the device
  first, then crosses the network (server link → client link).

FIFO resources are *reserved*: events are processed in time order, so when a transfer or a
sub-request becomes ready at a resource its start is ``max(now, free_at)`` and the resource
is free again at its end – FIFO by ready time, without a queue.  With ``elevator=True`` a
device keeps a real queue and serves, whenever it becomes free, the queued sub-request with
the smallest (object, offset) at or after the head (C-LOOK), else the smallest one.

A *request* is a set of sub-requests issued together; it completes when its last
sub-request does.  Requests form *streams* (a rank's blocking request sequence:
``pred``/``succ``) and *phases* (a barrier: a request of phase p starts only after every
request of the phases before p completed – collective I/O's cycle synchronisation).
Request r is issued at ``max(release[r], think[r] + max(pred done, barrier))``.  A
request's completion (and so its successor's issue event) is known as soon as its last
sub-request has been given its final resource; the successor's event is pushed at that
(future) time, so events are still processed in time order.

The only randomness inside the core: ties between events at exactly the same time (e.g.
four ranks that send at t = 0 to one server) are broken by a seeded random key, so the
order among simultaneous arrivals is a random interleaving.

Events: one per request (issue) and two per sub-request (receiver link and device for a
write; sender link and receiver link for a read), one more per sub-request with the
elevator.  The heap is a binary heap over three parallel arrays of ``cap`` entries: the
caller's bound on the events pending at once (every sub-request has at most one pending
event, every request stream at most one active request, every server one elevator event;
see :func:`pario.simulate.core.heap_bound`), or the worst case ``n_sub + n_req + n_srv + 1``
(``cap`` ≤ 0).  ``req_release``, ``req_think`` and ``req_phase`` may be empty: all zero.
A push beyond ``cap`` stops the run and says so (the last value returned),
and the caller runs again with the worst case: the result never depends on ``cap``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

K_ISSUE = 0  # a request is issued: sender links of its writes/messages, devices of its reads
K_DEV = 1  # write path: data arrived at the server, ready for the device
K_SND = 2  # read path: device done, ready for the server's (sender's) link
K_FREE = 3  # elevator: device became free (payload = server)
K_RCV = 4  # a transfer's data starts arriving: the receiver's link


@njit(cache=True, inline="always")
def _at(a, r):
    """``a[r]``, or 0 for an empty array (release and think times all zero: not stored)."""
    return a[r] if a.shape[0] > 0 else 0.0


@njit(cache=True, inline="always")
def _ph(a, r):
    """``a[r]``, or phase 0 for an empty array (one phase: not stored)."""
    return a[r] if a.shape[0] > 0 else 0


@njit(cache=True, inline="always")
def _less(ta, ka, tb, kb):
    return ta < tb or (ta == tb and ka < kb)


@njit(cache=True)
def _push(H, HK, HP, st, t, p):
    """Push (t, random key, payload); st[0] = heap size, st[1] = rng state, st[2] = overflow."""
    if st[0] >= H.shape[0]:
        st[2] = 1
        return
    x = np.uint64(st[1])
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    st[1] = np.int64(x)
    k = np.int64((x * np.uint64(2685821657736338717)) >> np.uint64(1))
    i = st[0]
    while i > 0:
        parent = (i - 1) >> 1
        if _less(t, k, H[parent], HK[parent]):
            H[i] = H[parent]
            HK[i] = HK[parent]
            HP[i] = HP[parent]
            i = parent
        else:
            break
    H[i] = t
    HK[i] = k
    HP[i] = p
    st[0] += 1


@njit(cache=True)
def _pop(H, HK, HP, st):
    n = st[0] - 1
    st[0] = n
    if n == 0:
        return
    t = H[n]
    k = HK[n]
    p = HP[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _less(H[c + 1], HK[c + 1], H[c], HK[c]):
            c += 1
        if _less(H[c], HK[c], t, k):
            H[i] = H[c]
            HK[i] = HK[c]
            HP[i] = HP[c]
            i = c
        else:
            break
    H[i] = t
    HK[i] = k
    HP[i] = p


@njit(cache=True, nogil=True)
def simulate_core(req_sub_ptr, req_op, req_release, req_think, req_pred, req_succ, req_phase, phase_ptr,
                  sub_req, sub_link_a, sub_link_b, sub_server, sub_local, sub_len, sub_obj,
                  alpha, beta, shape, e, t, n_links, elevator, seed, cap):
    n_req = req_op.shape[0]
    n_sub = sub_req.shape[0]
    n_srv = alpha.shape[0]
    n_phase = phase_ptr.shape[0] - 1

    req_issue = np.full(n_req, np.nan)
    req_done = np.full(n_req, np.nan)
    req_left = np.empty(n_req, dtype=np.int64)
    req_max = np.zeros(n_req)
    req_state = np.zeros(n_req, dtype=np.int8)  # 0 waiting, 1 issued, 2 complete
    for r in range(n_req):
        req_left[r] = req_sub_ptr[r + 1] - req_sub_ptr[r]

    link_free = np.zeros(n_links)
    link_busy = np.zeros(n_links)
    dev_free = np.zeros(n_srv)
    dev_busy = np.zeros(n_srv, dtype=np.bool_)
    head_obj = np.full(n_srv, -1, dtype=np.int64)
    head_pos = np.full(n_srv, -1, dtype=np.int64)
    srv_busy = np.zeros(n_srv)
    srv_bytes = np.zeros(n_srv, dtype=np.int64)
    srv_nsub = np.zeros(n_srv, dtype=np.int64)
    srv_nseq = np.zeros(n_srv, dtype=np.int64)
    npb = max(n_phase, 1)
    phase_busy = np.zeros((npb, n_srv))
    phase_end = np.zeros(npb)
    outstanding = np.zeros(npb, dtype=np.int64)
    for p in range(n_phase):
        outstanding[p] = phase_ptr[p + 1] - phase_ptr[p]
    q_head = np.full(n_srv, -1, dtype=np.int64)
    q_next = np.full(n_sub if elevator else 1, -1, dtype=np.int64)

    worst = n_sub + n_req + n_srv + 1
    if cap <= 0 or cap > worst:
        cap = worst
    H = np.empty(cap)
    HK = np.empty(cap, dtype=np.int64)
    HP = np.empty(cap, dtype=np.int64)
    st = np.zeros(3, dtype=np.int64)  # heap size, rng state, overflow
    x = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)
    if x == np.uint64(0):
        x = np.uint64(1)
    st[1] = np.int64(x)
    n_events = 0

    # open phase 0, skipping empty phases
    cur = 0
    while n_phase > 0:
        for r in range(phase_ptr[cur], phase_ptr[cur + 1]):
            if req_pred[r] < 0:
                _push(H, HK, HP, st, max(phase_end[cur] + _at(req_think, r), _at(req_release, r)), r * 8 + K_ISSUE)
        if outstanding[cur] == 0 and cur < n_phase - 1:
            phase_end[cur + 1] = phase_end[cur]
            cur += 1
        else:
            break

    while st[0] > 0 and st[2] == 0:
        now = H[0]
        payload = HP[0]
        _pop(H, HK, HP, st)
        n_events += 1
        kind = payload & 7
        ident = payload >> 3
        fin_i = -1  # a sub-request whose final end time `fin_t` became known in this event
        fin_t = 0.0

        if kind == K_ISSUE:
            r = ident
            req_issue[r] = now
            req_state[r] = 1
            op = req_op[r]
            a0 = req_sub_ptr[r]
            a1 = req_sub_ptr[r + 1]
            if a1 == a0:
                req_max[r] = now
                cur = _complete(r, now, req_state, req_done, req_phase, req_succ, req_pred, req_release, req_think,
                                phase_ptr, phase_end, outstanding, n_phase, cur, H, HK, HP, st)
                continue
            for i in range(a0, a1):
                srv = sub_server[i]
                if srv < 0 or op == 1:  # the network first (messages, writes): the sender's link now
                    dur = e + sub_len[i] * t
                    if dur > 0.0:
                        snd = sub_link_a[i] if op == 1 else sub_link_b[i]
                        s0 = max(now, link_free[snd])
                        link_free[snd] = s0 + dur
                        link_busy[snd] += dur
                        _push(H, HK, HP, st, s0, i * 8 + K_RCV)
                    elif srv < 0:
                        _finish(i, now, sub_req, req_left, req_max)
                    else:
                        end = _arrive(i, now, srv, op, elevator, dev_free, dev_busy, q_head, q_next, head_obj,
                                      head_pos, sub_obj, sub_local, sub_len, alpha, beta, shape, srv_busy, srv_bytes,
                                      srv_nsub, srv_nseq, phase_busy, _ph(req_phase, r), H, HK, HP, st)
                        if end >= 0.0:
                            _finish(i, end, sub_req, req_left, req_max)
                else:  # read: the device first, arrival now
                    end = _arrive(i, now, srv, op, elevator, dev_free, dev_busy, q_head, q_next, head_obj, head_pos,
                                  sub_obj, sub_local, sub_len, alpha, beta, shape, srv_busy, srv_bytes, srv_nsub, srv_nseq,
                                  phase_busy, _ph(req_phase, r), H, HK, HP, st)
                    if end >= 0.0:
                        _push(H, HK, HP, st, end, i * 8 + K_SND)
            if req_left[r] == 0:
                cur = _complete(r, req_max[r], req_state, req_done, req_phase, req_succ, req_pred, req_release,
                                req_think, phase_ptr, phase_end, outstanding, n_phase, cur, H, HK, HP, st)
            continue
        elif kind == K_RCV:  # the data reaches the receiver's link
            i = ident
            r = sub_req[i]
            op = req_op[r]
            dur = e + sub_len[i] * t
            rcv = sub_link_b[i] if op == 1 else sub_link_a[i]
            s1 = max(now, link_free[rcv])
            end = s1 + dur
            link_free[rcv] = end
            link_busy[rcv] += dur
            if sub_server[i] >= 0 and op == 1:
                _push(H, HK, HP, st, end, i * 8 + K_DEV)
            else:
                fin_i = i
                fin_t = end
        elif kind == K_DEV:  # a write sub-request reaches its server's device
            i = ident
            r = sub_req[i]
            end = _arrive(i, now, sub_server[i], 1, elevator, dev_free, dev_busy, q_head, q_next, head_obj,
                          head_pos, sub_obj, sub_local, sub_len, alpha, beta, shape, srv_busy, srv_bytes, srv_nsub,
                          srv_nseq, phase_busy, _ph(req_phase, r), H, HK, HP, st)
            if end >= 0.0:
                fin_i = i
                fin_t = end
        elif kind == K_SND:  # a read sub-request's data leaves the server: the sender's link
            i = ident
            dur = e + sub_len[i] * t
            if dur > 0.0:
                snd = sub_link_b[i]
                s0 = max(now, link_free[snd])
                link_free[snd] = s0 + dur
                link_busy[snd] += dur
                _push(H, HK, HP, st, s0, i * 8 + K_RCV)
            else:
                fin_i = i
                fin_t = now
        else:  # K_FREE: an elevator device became free
            srv = ident
            if q_head[srv] < 0:
                dev_busy[srv] = False
                continue
            i = _pick_clook(srv, q_head, q_next, head_obj, head_pos, sub_obj, sub_local)
            r = sub_req[i]
            op = req_op[r]
            end = _serve(i, now, srv, op, head_obj, head_pos, sub_obj, sub_local, sub_len, alpha, beta, shape,
                         srv_busy, srv_bytes, srv_nsub, srv_nseq, phase_busy, _ph(req_phase, r))
            dev_free[srv] = end
            _push(H, HK, HP, st, end, srv * 8 + K_FREE)
            if op == 0:
                _push(H, HK, HP, st, end, i * 8 + K_SND)
            else:
                fin_i = i
                fin_t = end
        if fin_i >= 0:
            r = sub_req[fin_i]
            _finish(fin_i, fin_t, sub_req, req_left, req_max)
            if req_left[r] == 0:
                cur = _complete(r, req_max[r], req_state, req_done, req_phase, req_succ, req_pred, req_release,
                                req_think, phase_ptr, phase_end, outstanding, n_phase, cur, H, HK, HP, st)

    for p in range(1, n_phase):  # phases never opened (nothing left to run) end where the previous did
        if phase_end[p] < phase_end[p - 1] and outstanding[p] == 0 and p > cur:
            phase_end[p] = phase_end[p - 1]
    return (req_issue, req_done, srv_busy, srv_bytes, srv_nsub, srv_nseq, link_busy, phase_end[:n_phase],
            phase_busy[:n_phase], n_events, st[2] != 0)


@njit(cache=True, inline="always")
def _finish(i, end, sub_req, req_left, req_max):
    """Sub-request i is finished at `end`."""
    r = sub_req[i]
    if end > req_max[r]:
        req_max[r] = end
    req_left[r] -= 1


@njit(cache=True)
def _serve(i, start, srv, op, head_obj, head_pos, sub_obj, sub_local, sub_len, alpha, beta, shape,
           srv_busy, srv_bytes, srv_nsub, srv_nseq, phase_busy, phase):
    """Serve sub-request i on its device from `start`; returns the end time (head tracking)."""
    seq = 1 if (head_obj[srv] == sub_obj[i] and head_pos[srv] == sub_local[i]) else 0
    a = alpha[srv, op, seq]
    x = sub_len[i] * beta[srv, op]
    if shape[srv] == 0:      # additive: startup + transfer (the papers' α + s·β)
        dur = a + x
    else:                    # max: a rate limiter (IOPS and bandwidth caps), max(α, s·β)
        dur = a if a > x else x
    head_obj[srv] = sub_obj[i]
    head_pos[srv] = sub_local[i] + sub_len[i]
    srv_busy[srv] += dur
    srv_bytes[srv] += sub_len[i]
    srv_nsub[srv] += 1
    srv_nseq[srv] += seq
    phase_busy[phase, srv] += dur
    return start + dur


@njit(cache=True)
def _arrive(i, now, srv, op, elevator, dev_free, dev_busy, q_head, q_next, head_obj, head_pos, sub_obj,
            sub_local, sub_len, alpha, beta, shape, srv_busy, srv_bytes, srv_nsub, srv_nseq, phase_busy, phase,
            H, HK, HP, st):
    """Sub-request i arrives at its device: FIFO reservation, or the elevator queue.

    Returns the device end time, or -1 when queued (elevator: the end is known later)."""
    if not elevator:
        start = max(now, dev_free[srv])
        end = _serve(i, start, srv, op, head_obj, head_pos, sub_obj, sub_local, sub_len, alpha, beta, shape,
                     srv_busy, srv_bytes, srv_nsub, srv_nseq, phase_busy, phase)
        dev_free[srv] = end
        return end
    if not dev_busy[srv]:
        dev_busy[srv] = True
        end = _serve(i, now, srv, op, head_obj, head_pos, sub_obj, sub_local, sub_len, alpha, beta, shape,
                     srv_busy, srv_bytes, srv_nsub, srv_nseq, phase_busy, phase)
        dev_free[srv] = end
        _push(H, HK, HP, st, end, srv * 8 + K_FREE)
        return end
    q_next[i] = q_head[srv]
    q_head[srv] = i
    return -1.0


@njit(cache=True)
def _pick_clook(srv, q_head, q_next, head_obj, head_pos, sub_obj, sub_local):
    """Remove and return the queued sub-request C-LOOK serves next on device srv."""
    ho = head_obj[srv]
    hpos = head_pos[srv]
    best = -1
    best_prev = -1
    low = -1
    low_prev = -1
    prev = -1
    i = q_head[srv]
    while i >= 0:
        o = sub_obj[i]
        x = sub_local[i]
        if o > ho or (o == ho and x >= hpos):
            if best < 0 or o < sub_obj[best] or (o == sub_obj[best] and x < sub_local[best]):
                best = i
                best_prev = prev
        if low < 0 or o < sub_obj[low] or (o == sub_obj[low] and x < sub_local[low]):
            low = i
            low_prev = prev
        prev = i
        i = q_next[i]
    if best < 0:
        best = low
        best_prev = low_prev
    if best_prev < 0:
        q_head[srv] = q_next[best]
    else:
        q_next[best_prev] = q_next[best]
    q_next[best] = -1
    return best


@njit(cache=True)
def _complete(r, done, req_state, req_done, req_phase, req_succ, req_pred, req_release, req_think, phase_ptr, phase_end,
              outstanding, n_phase, cur, H, HK, HP, st):
    """Request r completes at `done`: issue its stream successor, close phases; returns the open phase."""
    req_state[r] = 2
    req_done[r] = done
    p = _ph(req_phase, r)
    outstanding[p] -= 1
    if done > phase_end[p]:
        phase_end[p] = done
    s = req_succ[r]
    if s >= 0 and _ph(req_phase, s) <= cur:
        _push(H, HK, HP, st, max(done + _at(req_think, s), _at(req_release, s)), s * 8 + K_ISSUE)
    while cur < n_phase - 1 and outstanding[cur] == 0:
        tend = phase_end[cur]
        cur += 1
        phase_end[cur] = tend
        for q in range(phase_ptr[cur], phase_ptr[cur + 1]):
            pr = req_pred[q]
            if pr < 0 or req_state[pr] == 2:
                _push(H, HK, HP, st, max(tend + _at(req_think, q), _at(req_release, q)), q * 8 + K_ISSUE)
    return cur
