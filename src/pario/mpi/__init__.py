"""pario's MPI-IO runtime (run): transparent redirection, replicas and heterogeneity-aware collective I/O.

``from pario.mpi import File`` — see :mod:`pario.mpi.file`.  Modules: :mod:`~pario.mpi.views`
(file views), :mod:`~pario.mpi.twophase` (two-phase collective I/O), :mod:`~pario.mpi.placement`
(server/kind of file pieces), :mod:`~pario.mpi.profiler` (``pario_trace``),
:mod:`~pario.mpi.hints`, :mod:`~pario.mpi.backend` / :mod:`~pario.mpi.storeio` (bytes).
"""

from .file import File
from .hints import Hints

__all__ = ["File", "Hints"]
