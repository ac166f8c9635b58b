"""File views: flatten MPI datatypes and map a view's data stream to file byte ranges.

An MPI-IO file view is ``(disp, etype, filetype)``: the file is tiled with ``filetype``
starting at byte ``disp`` (tile ``k`` at ``disp + k·extent(filetype)``), and only the bytes
of the filetype's type map are visible, in type-map order.  A data access at view offset
``o`` (in etypes) covers the data-stream bytes ``[o·size(etype), o·size(etype) + n)``.

:func:`flatten` turns an mpi4py ``Datatype`` into its type map as two numpy arrays
``(disp, length)`` of contiguous byte blocks (adjacent blocks merged), decoding derived
types recursively with ``Datatype.decode()`` (MPI ``Get_envelope``/``Get_contents``):
named, contiguous, vector, hvector, indexed, hindexed, indexed_block, hindexed_block,
struct, subarray, resized and dup — what IOR strided (vector / resized contiguous), HPIO
(vector, hvector, struct) and MPI-Tile-IO (subarray) build.  ``darray`` is refused.

:class:`View` maps a data-stream range to file pieces, vectorised with numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import ParioError

_I64 = np.int64


def _merge(d: np.ndarray, l: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge blocks that continue each other (d[i] + l[i] == d[i+1]); drop empty ones."""
    keep = l > 0
    d, l = d[keep], l[keep]
    if len(d) <= 1:
        return d.astype(_I64), l.astype(_I64)
    cont = d[:-1] + l[:-1] == d[1:]
    if not cont.any():
        return d, l
    start = np.r_[True, ~cont]
    grp = np.cumsum(start) - 1
    nd = d[start]
    nl = np.bincount(grp, weights=l, minlength=len(nd)).astype(_I64)
    return nd, nl


def _tile(d: np.ndarray, l: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The blocks (d, l) repeated at each of ``offsets`` (in order)."""
    offsets = np.asarray(offsets, dtype=_I64)
    return (offsets[:, None] + d[None, :]).ravel(), np.broadcast_to(l, (len(offsets), len(l))).ravel().copy()


_CACHE: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def flatten(dt) -> tuple[np.ndarray, np.ndarray]:
    """Type map of an mpi4py datatype as ``(disp, length)`` byte blocks, merged, in type-map order."""
    d, l = _flatten(dt)
    return _merge(d, l)


def _extent(dt) -> int:
    return int(dt.Get_extent()[1])


def _flatten(dt) -> tuple[np.ndarray, np.ndarray]:
    base, combiner, p = dt.decode()
    c = combiner.upper() if isinstance(combiner, str) else str(combiner)
    if c == "NAMED":
        return np.array([0], _I64), np.array([dt.Get_size()], _I64)
    if c in ("DUP",):
        return _flatten(base)
    if c == "STRUCT":
        ds, ls = [], []
        for n, disp, t in zip(p["blocklengths"], p["displacements"], p["datatypes"]):
            td, tl = flatten(t)
            te = _extent(t)
            a, b = _tile(td, tl, int(disp) + np.arange(n, dtype=_I64) * te)
            ds.append(a)
            ls.append(b)
        if not ds:
            return np.zeros(0, _I64), np.zeros(0, _I64)
        return np.concatenate(ds), np.concatenate(ls)
    bd, bl = _flatten(base)
    bd, bl = _merge(bd, bl)
    ext = _extent(base)
    if c == "CONTIGUOUS":
        return _tile(bd, bl, np.arange(p["count"], dtype=_I64) * ext)
    if c in ("VECTOR", "HVECTOR"):
        stride = p["stride"] * (ext if c == "VECTOR" else 1)
        offs = (np.arange(p["count"], dtype=_I64)[:, None] * stride
                + np.arange(p["blocklength"], dtype=_I64)[None, :] * ext).ravel()
        return _tile(bd, bl, offs)
    if c in ("INDEXED", "HINDEXED", "INDEXED_BLOCK", "HINDEXED_BLOCK"):
        disps = np.asarray(p["displacements"], dtype=_I64)
        if "INDEXED" == c or "INDEXED_BLOCK" == c:
            disps = disps * ext
        if "blocklengths" in p:
            bls = np.asarray(p["blocklengths"], dtype=_I64)
        else:
            bls = np.full(len(disps), p["blocklength"], dtype=_I64)
        offs = np.repeat(disps, bls) + (np.arange(bls.sum(), dtype=_I64)
                                       - np.repeat(np.cumsum(bls) - bls, bls)) * ext
        return _tile(bd, bl, offs)
    if c == "SUBARRAY":
        from mpi4py import MPI

        sizes = np.asarray(p["sizes"], dtype=_I64)
        sub = np.asarray(p["subsizes"], dtype=_I64)
        starts = np.asarray(p["starts"], dtype=_I64)
        if p["order"] == MPI.ORDER_FORTRAN:
            sizes, sub, starts = sizes[::-1], sub[::-1], starts[::-1]
        # C order: last dimension fastest; element strides in units of the base extent
        strides = np.ones(len(sizes), dtype=_I64)
        for k in range(len(sizes) - 2, -1, -1):
            strides[k] = strides[k + 1] * sizes[k + 1]
        idx = np.zeros(1, dtype=_I64)
        for k in range(len(sizes)):
            idx = (idx[:, None] + ((starts[k] + np.arange(sub[k], dtype=_I64)) * strides[k])[None, :]).ravel()
        return _tile(bd, bl, idx * ext)
    if c == "RESIZED":
        return bd, bl
    raise ParioError(f"file view: datatype combiner {c} is not supported (use contiguous, vector, indexed, struct, subarray or resized)")


@dataclass
class View:
    """A file view ``(disp, etype, filetype)`` flattened for fast mapping."""

    disp: int = 0
    etype_size: int = 1
    ft_disp: np.ndarray = None  # type: ignore[assignment]
    ft_len: np.ndarray = None  # type: ignore[assignment]
    ft_extent: int = 1

    def __post_init__(self):
        if self.ft_disp is None:
            self.ft_disp = np.array([0], _I64)
            self.ft_len = np.array([1], _I64)
            self.ft_extent = 1
        self.ft_size = int(self.ft_len.sum())
        self.ft_prefix = np.concatenate(([0], np.cumsum(self.ft_len))).astype(_I64)
        # contiguous view: the filetype is one block that fills its extent
        self.contiguous = len(self.ft_disp) == 1 and int(self.ft_disp[0]) == 0 and self.ft_size == self.ft_extent

    @classmethod
    def from_types(cls, disp, etype, filetype) -> "View":
        if filetype is None:
            filetype = etype
        d, l = flatten(filetype)
        esz = int(etype.Get_size())
        if esz <= 0:
            raise ParioError("file view: etype has size 0")
        size = int(l.sum())
        if size == 0:
            raise ParioError("file view: filetype has no data")
        if size % esz:
            raise ParioError("file view: filetype size is not a multiple of the etype size")
        if len(d) > 1 and np.any(np.diff(d) < 0):
            raise ParioError("file view: filetype displacements must be monotonically non-decreasing")
        if len(d) and d.min() < 0 and int(disp) + int(d.min()) < 0:
            raise ParioError("file view: filetype reaches before the start of the file")
        return cls(int(disp), esz, d, l, _extent(filetype))

    def pieces(self, offset: int, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
        """File pieces ``(offset, length)`` of view offset ``offset`` (etypes) for ``nbytes`` data bytes.

        Pieces are in data-stream order (which is file order for a valid view) and merged
        where they touch.
        """
        s = int(offset) * self.etype_size
        n = int(nbytes)
        if n <= 0:
            return np.zeros(0, _I64), np.zeros(0, _I64)
        if self.contiguous:
            return np.array([self.disp + s], _I64), np.array([n], _I64)
        S, E, P, nb = self.ft_size, self.ft_extent, self.ft_prefix, len(self.ft_disp)
        e = s + n
        k0, r0 = divmod(s, S)
        k1, r1 = divmod(e - 1, S)
        j0 = int(np.searchsorted(P, r0, side="right")) - 1
        j1 = int(np.searchsorted(P, r1, side="right")) - 1
        g = np.arange(k0 * nb + j0, k1 * nb + j1 + 1, dtype=_I64)
        tile, j = np.divmod(g, nb)
        foff = self.disp + tile * E + self.ft_disp[j]
        flen = self.ft_len[j].copy()
        sstart = tile * S + P[j]
        # clip first and last block to [s, e)
        cut0 = s - sstart[0]
        foff[0] += cut0
        flen[0] -= cut0
        flen[-1] -= (sstart[-1] + self.ft_len[j[-1]]) - e
        return _merge(foff, flen)

    def stream_to_file(self, pos: np.ndarray) -> np.ndarray:
        """File offset of data-stream byte positions ``pos`` (absolute, bytes)."""
        pos = np.asarray(pos, dtype=_I64)
        if self.contiguous:
            return self.disp + pos
        k, r = np.divmod(pos, self.ft_size)
        j = np.searchsorted(self.ft_prefix, r, side="right") - 1
        return self.disp + k * self.ft_extent + self.ft_disp[j] + (r - self.ft_prefix[j])


def memory_layout(buf) -> tuple[object, np.ndarray, np.ndarray, int]:
    """Decode a buffer argument: ``buf``, ``[buf, datatype]`` or ``[buf, count, datatype]``.

    Returns ``(raw, disp, length, nbytes)``: ``raw`` a writable-or-not uint8 numpy view of
    the whole buffer, the memory blocks of the data (byte offsets into ``raw``) and the
    number of data bytes.  A contiguous buffer has one block.
    """
    count = None
    dtype = None
    if isinstance(buf, (list, tuple)):
        if len(buf) == 2:
            buf, dtype = buf
        elif len(buf) == 3:
            buf, count, dtype = buf
        else:
            raise ParioError("buffer must be buf, [buf, datatype] or [buf, count, datatype]")
    raw = _as_bytes(buf)
    if dtype is None:
        return raw, np.array([0], _I64), np.array([raw.size], _I64), raw.size
    d, l = flatten(dtype)
    size = int(l.sum())
    ext = _extent(dtype)
    if count is None:
        count = raw.size // ext if ext else 0
    count = int(count)
    if len(d) == 1 and int(d[0]) == 0 and size == ext:
        n = count * size
        if n > raw.size:
            raise ParioError("buffer is smaller than count × datatype size")
        return raw, np.array([0], _I64), np.array([n], _I64), n
    md, ml = _merge(*_tile(d, l, np.arange(count, dtype=_I64) * ext))
    if len(md) and int((md + ml).max()) > raw.size:
        raise ParioError("buffer is smaller than the memory datatype's extent × count")
    return raw, md, ml, int(ml.sum())


def _as_bytes(buf) -> np.ndarray:
    if isinstance(buf, np.ndarray):
        if not buf.flags.c_contiguous:
            raise ParioError("buffer must be C-contiguous")
        return buf.reshape(-1).view(np.uint8)
    mv = memoryview(buf)
    if not mv.c_contiguous:
        raise ParioError("buffer must be C-contiguous")
    return np.frombuffer(mv.cast("B"), dtype=np.uint8) if mv.readonly else np.frombuffer(mv.cast("B"), dtype=np.uint8)


# ---------------------------------------------------------------------- gather / scatter
def gather(src: np.ndarray, offs: np.ndarray, lens: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Concatenate ``src[offs[i] : offs[i]+lens[i]]`` (vectorised for many small blocks)."""
    n = len(offs)
    total = int(lens.sum()) if n else 0
    if out is None:
        out = np.empty(total, dtype=np.uint8)
    if n == 0:
        return out
    if n == 1:
        o = int(offs[0])
        out[:total] = src[o:o + total]
        return out
    if n <= 64 or total // n >= 2048:
        pos = 0
        for o, ln in zip(offs.tolist(), lens.tolist()):
            out[pos:pos + ln] = src[o:o + ln]
            pos += ln
        return out
    out[:total] = src[_byte_index(offs, lens, total)]
    return out


def scatter(dst: np.ndarray, offs: np.ndarray, lens: np.ndarray, data: np.ndarray) -> None:
    """``dst[offs[i] : offs[i]+lens[i]] = `` consecutive chunks of ``data``."""
    n = len(offs)
    if n == 0:
        return
    total = int(lens.sum())
    if n == 1:
        o = int(offs[0])
        dst[o:o + total] = data[:total]
        return
    if n <= 64 or total // n >= 2048:
        pos = 0
        for o, ln in zip(offs.tolist(), lens.tolist()):
            dst[o:o + ln] = data[pos:pos + ln]
            pos += ln
        return
    dst[_byte_index(offs, lens, total)] = data[:total]


def _byte_index(offs: np.ndarray, lens: np.ndarray, total: int) -> np.ndarray:
    starts = np.cumsum(lens) - lens
    return np.repeat(offs - starts, lens) + np.arange(total, dtype=_I64)
