"""pario: trace → model → plan → simulate | apply | run, for HPC parallel I/O.

The package is laid out in the order data flows through it:

- :mod:`pario.trace`    – the request trace type, its file formats, Darshan import, patterns
- :mod:`pario.workload` – generators for IOR, HPIO, MPI-Tile-IO and NAS BTIO traces
- :mod:`pario.system`   – system profiles (servers, network, clients)
- :mod:`pario.layout`   – data layouts and the exact request → sub-request mapping
- :mod:`pario.model`    – cost models
- :mod:`pario.plan`     – planners (CI-LAYOUT, PADP, PSA, CEDA, HACIO order)
- :mod:`pario.simulate` – discrete-event simulator
- :mod:`pario.store`    – embedded striped store (apply)
- :mod:`pario.native`   – the RMT core in C (journal, table, locks)
- :mod:`pario.mpi`      – MPI-IO runtime (run)
- :mod:`pario.run`      – the full loop: traced run, advise, replicate, redirected run
"""

__version__ = "0.1.0"


class ParioError(Exception):
    """A user-facing error: the CLI prints its message as one line and exits non-zero.

    ``details`` (optional, any number of lines: e.g. a database's integrity-check report)
    is printed only with ``pario --verbose`` or ``PARIO_DEBUG=1``."""

    def __init__(self, message: str = "", details: str | None = None):
        super().__init__(message)
        self.details = details
