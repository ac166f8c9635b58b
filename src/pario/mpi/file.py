"""``pario.mpi.File``: an MPI-IO file with transparent redirection and heterogeneity-aware collective I/O.

The schemes of the papers live inside the MPI-IO library so that applications run
unchanged (CEDA seed 000 §5.2, CI-LAYOUT seed 002 §5.1, HACIO seed 004 §3.2).  This class
is pario's MPI-IO layer over mpi4py:

- ``File.open(comm, path, amode, info)`` — collective; ``amode`` uses ``MPI.MODE_*``;
  ``info`` an ``MPI.Info`` or a dict of hints (:mod:`pario.mpi.hints`).
- Independent: ``read_at``, ``write_at``, ``read``, ``write``, ``seek``, ``get_position``,
  ``get_size``, ``set_size``, ``sync``.  Through the file's back end: a plain file, or a
  pario store file whose redirector consults the RMT and replicas (CEDA §5.2, seed 002 §5).
- Collective: ``read_at_all``, ``write_at_all``, ``read_all``, ``write_all`` — pario's own
  two-phase I/O with the request order ``romcio|cacio|hacio``: the C driver of
  ``collective/`` (the preloaded library's), bound by :mod:`pario.mpi.twophase`.
- ``set_view(disp, etype, filetype)`` with contiguous, vector, indexed, struct, subarray and
  resized file types (:mod:`pario.mpi.views`).
- ``close()`` — collective: flushes dirty replicas / finishes lazy synchronisation (store),
  merges the ``pario_trace`` profile.

Buffers are numpy arrays, bytes-like objects or mpi4py-style ``[buf, datatype]`` /
``[buf, count, datatype]``.  Offsets are in etypes of the current view, as in MPI.
Methods return the number of bytes transferred.  Capitalised aliases (``Write_at_all``…)
let mpi4py programs switch with one import.
"""

from __future__ import annotations

import os

import numpy as np

from .. import ParioError
from ..plan.collective import ORDERS, order_for
from ..trace.core import READ, WRITE
from . import twophase
from .backend import PosixBackend, posix_flags
from .hints import Hints
from .views import View, gather, memory_layout, scatter

_I64 = np.int64


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError:  # pragma: no cover
        raise ParioError("pario.mpi needs mpi4py (pip install mpi4py mpich)") from None
    return MPI


def _check_amode(MPI, amode: int) -> None:
    access = [bool(amode & m) for m in (MPI.MODE_RDONLY, MPI.MODE_WRONLY, MPI.MODE_RDWR)]
    if sum(access) != 1:
        raise ParioError("amode must contain exactly one of MODE_RDONLY, MODE_WRONLY, MODE_RDWR")
    if amode & MPI.MODE_RDONLY and amode & (MPI.MODE_CREATE | MPI.MODE_EXCL):
        raise ParioError("amode: MODE_CREATE/MODE_EXCL need write access")
    if amode & MPI.MODE_SEQUENTIAL:
        raise ParioError("amode: MODE_SEQUENTIAL is not supported")


class File:
    """An open MPI-IO file (see module docstring)."""

    def __init__(self):  # use File.open
        self.comm = None
        self.closed = True

    # ------------------------------------------------------------------ open / close
    @classmethod
    def open(cls, comm, path, amode=None, info=None) -> "File":
        MPI = _mpi()
        if amode is None:
            amode = MPI.MODE_RDONLY
        _check_amode(MPI, amode)
        hints = Hints.parse(info)
        self = cls()
        self.comm = comm.Dup()
        self.path = os.fspath(path)
        self.amode = amode
        self.hints = hints
        self.view = View()
        self.position = 0  # individual file pointer, etypes
        self.last_schedule = None
        self.plan = None
        self.system = None
        self.recorder = None
        try:
            self._open_backend(MPI)
        except BaseException:
            self.comm.Free()
            raise
        # the two-phase driver's private communicator (point-to-point tags of its own, the
        # node of every rank cached on it), as ROMIO keeps one per file
        self.tp_comm = self.comm.Dup()
        self.aggregators = twophase.choose_aggregators(self.tp_comm, hints.cb_nodes)
        forced = getattr(self.backend, "forced_aggregators", None)
        if forced:  # a store file: its store rank aggregates (see pario.mpi.storeio)
            self.aggregators = list(forced)
        self.order = order_for(self.plan, hints.order)
        self.order_row = ORDERS.index(self.order.lower())   # a row of collective/order.c's table
        self.placement = self.backend.placement()
        self.tp_layout = twophase.compile_layout(self.placement)
        if hints.trace:
            from .profiler import Recorder

            self.recorder = Recorder(self.comm, hints.trace, self.path, hints=self.get_info(),
                                     aggregators=self.aggregators)
        if amode & MPI.MODE_APPEND:
            size = self.backend.size()
            self.position = size // self.view.etype_size
        self.closed = False
        return self

    def _agree(self, fn):
        """Run ``fn`` on every rank; raise the same ParioError everywhere if one failed."""
        try:
            result, err = fn(), None
        except ParioError as exc:
            result, err = None, str(exc)
        except OSError as exc:
            result, err = None, f"{self.path}: {exc.strerror or exc}"
        errs = [e for e in self.comm.allgather(err) if e]
        if errs:
            if err is None and hasattr(result, "close"):
                result.close()
            raise ParioError(errs[0])
        return result

    def _open_backend(self, MPI) -> None:
        h = self.hints
        # plan and system (for placement / collective order)
        if h.plan:
            from ..plan.base import Plan

            def load_plan():
                import json

                try:
                    sysname = json.loads(open(h.plan).read()).get("system")
                except FileNotFoundError:
                    raise ParioError(f"plan file {h.plan!r} does not exist") from None
                except (OSError, ValueError) as exc:
                    raise ParioError(f"{h.plan}: not a JSON plan ({exc})") from None
                system = self._load_system(h.system or sysname)
                return Plan.load(h.plan, system), system

            self.plan, self.system = self._agree(load_plan)
        elif h.system:
            self.system = self._agree(lambda: self._load_system(h.system))
        if h.store:
            from .storeio import open_store_backend

            self.backend = self._agree(lambda: open_store_backend(self, MPI))
            return
        placement = self._agree(self._plain_placement)
        if self.comm.rank == 0:
            self._agree(lambda: os.close(os.open(self.path, posix_flags(self.amode, creating=True), 0o666)))
        else:
            self._agree(lambda: None)
        self.backend = self._agree(lambda: PosixBackend(self.path, posix_flags(self.amode, creating=False), placement))

    @staticmethod
    def _load_system(spec):
        if spec is None:
            return None
        from ..system import load_system

        return load_system(spec)

    def _plain_placement(self):
        """Placement of a plain file: ``pario_layout`` hint, the plan's layout, or striping hints."""
        from .placement import placement_from

        h = self.hints
        if self.system is None:
            return None
        layout = None
        if h.layout:
            from ..layout import parse_layout

            layout = parse_layout(h.layout, self.system)
        elif self.plan is not None:
            layout = self.plan.layout_for(self.path) or self.plan.layout_for(os.path.basename(self.path))
        elif h.striping_unit:
            from ..layout import Striped

            n = h.striping_factor or self.system.n
            layout = Striped.fixed(h.striping_unit, range(min(n, self.system.n)))
        return placement_from(self.system, layout)

    def close(self) -> None:
        """Collective: flush the back end (dirty replicas, lazy sync), merge the profile, close."""
        if self.closed:
            return
        MPI = _mpi()
        err = None
        try:
            self.backend.flush()
        except (ParioError, OSError) as exc:
            err = str(exc)
        self.backend.close()
        self.comm.Barrier()
        if self.recorder is not None:
            self.recorder.finish()
        if self.amode & MPI.MODE_DELETE_ON_CLOSE and self.comm.rank == 0:
            try:
                os.unlink(self.path)
            except OSError:
                pass
        self.comm.Barrier()
        self.tp_comm.Free()
        self.comm.Free()
        self.closed = True
        if err:
            raise ParioError(err)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ view / pointer / size
    def set_view(self, disp=0, etype=None, filetype=None, datarep="native", info=None) -> None:
        """Collective in MPI; here local (every rank sets its own view)."""
        MPI = _mpi()
        if datarep != "native":
            raise ParioError(f"data representation {datarep!r} is not supported (native only)")
        if etype is None:
            etype = MPI.BYTE
        self.view = View.from_types(disp, etype, filetype)
        self.position = 0

    def get_view(self):
        return self.view.disp, self.view.etype_size, self.view.ft_extent

    def seek(self, offset: int, whence=None) -> None:
        MPI = _mpi()
        whence = MPI.SEEK_SET if whence is None else whence
        if whence == MPI.SEEK_SET:
            pos = int(offset)
        elif whence == MPI.SEEK_CUR:
            pos = self.position + int(offset)
        elif whence == MPI.SEEK_END:
            pos = self._end_in_etypes() + int(offset)
        else:
            raise ParioError("seek: whence must be SEEK_SET, SEEK_CUR or SEEK_END")
        if pos < 0:
            raise ParioError("seek: negative position")
        self.position = pos

    def _end_in_etypes(self) -> int:
        """View offset (etypes) just past the last byte of the file (MPI_SEEK_END)."""
        size = self.backend.size()
        v = self.view
        if v.contiguous:
            return max(0, (size - v.disp) // v.etype_size)
        if size <= v.disp:
            return 0
        rel = size - v.disp
        k, r = divmod(rel, v.ft_extent)
        inside = int(np.clip(r - v.ft_disp, 0, v.ft_len).sum())
        return (k * v.ft_size + inside) // v.etype_size

    def get_position(self) -> int:
        return self.position

    def get_byte_offset(self, offset: int) -> int:
        return int(self.view.stream_to_file(np.array([int(offset) * self.view.etype_size]))[0])

    def get_size(self) -> int:
        return int(self.backend.size())

    def set_size(self, size: int) -> None:
        """Collective: resize the file (rank 0 does it; the others' handles learn the size,
        so that an extension they made before is void and their next write past it extends)."""
        if self.comm.rank == 0:
            self.backend.set_size(int(size))
        self.comm.Barrier()
        if self.comm.rank != 0:
            self.backend.resized(int(size))

    def sync(self) -> None:
        self.backend.sync()
        self.comm.Barrier()

    def get_amode(self) -> int:
        return self.amode

    def get_info(self) -> dict:
        return self.hints.as_info_dict(len(self.aggregators))

    # ------------------------------------------------------------------ data access
    def _prepare(self, offset: int, buf, is_write: bool):
        raw, md, ml, nbytes = memory_layout(buf)
        if nbytes % self.view.etype_size:
            raise ParioError("access size is not a multiple of the etype size")
        if not is_write and not raw.flags.writeable:
            raise ParioError("read buffer is not writable")
        foff, flen = self.view.pieces(offset, nbytes)
        contiguous_mem = len(md) == 1
        if is_write:
            stream = raw[int(md[0]):int(md[0]) + nbytes] if contiguous_mem else gather(raw, md, ml)
        else:
            stream = raw[int(md[0]):int(md[0]) + nbytes] if contiguous_mem else np.empty(nbytes, np.uint8)
        return raw, md, ml, nbytes, foff, flen, stream, contiguous_mem

    def _finish_read(self, raw, md, ml, stream, contiguous_mem):
        if not contiguous_mem:
            scatter(raw, md, ml, stream)

    def _check_access(self, is_write: bool):
        MPI = _mpi()
        if self.closed:
            raise ParioError("file is closed")
        if is_write and self.amode & MPI.MODE_RDONLY:
            raise ParioError("file was opened read-only")
        if not is_write and self.amode & MPI.MODE_WRONLY:
            raise ParioError("file was opened write-only")

    def _independent_pieces(self, is_write: bool, foff, flen, stream) -> int:
        pos = 0
        moved = 0
        b = self.backend
        for o, l in zip(foff.tolist(), flen.tolist()):
            if is_write:
                moved += b.pwrite(o, stream[pos:pos + l])
            else:
                got = b.pread_into(stream[pos:pos + l], o)
                moved += got
                if got < l:
                    break
            pos += l
        return moved

    def _access(self, offset: int, buf, is_write: bool, collective: bool) -> int:
        self._check_access(is_write)
        raw, md, ml, nbytes, foff, flen, stream, cm = self._prepare(offset, buf, is_write)
        rec = self.recorder
        t0 = rec.now() if rec is not None else 0.0
        if collective:
            moved = twophase.collective_io(self, is_write, foff, flen, stream)
        else:
            moved = self._independent_pieces(is_write, foff, flen, stream)
        if not is_write:
            self._finish_read(raw, md, ml, stream, cm)
        if rec is not None:
            rec.record(WRITE if is_write else READ, foff, flen, t0, rec.now(), collective)
        return moved

    def read_at(self, offset: int, buf) -> int:
        return self._access(offset, buf, False, False)

    def write_at(self, offset: int, buf) -> int:
        return self._access(offset, buf, True, False)

    def read_at_all(self, offset: int, buf) -> int:
        return self._access(offset, buf, False, True)

    def write_at_all(self, offset: int, buf) -> int:
        return self._access(offset, buf, True, True)

    def _advance(self, buf) -> int:
        _, _, _, nbytes = memory_layout(buf)
        return nbytes // self.view.etype_size

    def read(self, buf) -> int:
        n = self._access(self.position, buf, False, False)
        self.position += self._advance(buf)
        return n

    def write(self, buf) -> int:
        n = self._access(self.position, buf, True, False)
        self.position += self._advance(buf)
        return n

    def read_all(self, buf) -> int:
        n = self._access(self.position, buf, False, True)
        self.position += self._advance(buf)
        return n

    def write_all(self, buf) -> int:
        n = self._access(self.position, buf, True, True)
        self.position += self._advance(buf)
        return n

    # mpi4py-style aliases
    Open = open
    Close = close
    Set_view = set_view
    Get_view = get_view
    Seek = seek
    Get_position = get_position
    Get_byte_offset = get_byte_offset
    Get_size = get_size
    Set_size = set_size
    Sync = sync
    Get_amode = get_amode
    Get_info = get_info
    Read_at = read_at
    Write_at = write_at
    Read_at_all = read_at_all
    Write_at_all = write_at_all
    Read = read
    Write = write
    Read_all = read_all
    Write_all = write_all
