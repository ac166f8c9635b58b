"""Pre-estimation: measure α, β (per op and pattern) and e, t on real storage and network.

CI-LAYOUT seed 002 §4 / §6.2, PADP seed 003 §3.5, PSA seed 001 §3.4 (SPEC §4): every
server kind's startup time α and per-byte time β for sequential / random reads and writes,
over several request sizes and many repetitions, and the network's connection time e and
per-byte time t between a client and a server.

- :mod:`.storage` – timed O_DIRECT batches on one target directory (:func:`measure_target`)
- :mod:`.fit` – weighted least squares ``α + β·s`` or ``max(α, β·s)`` with confidence
  intervals and residual checks (:func:`.fit.fit`, :func:`.fit.check`)
- :mod:`.network` – e and t by a loopback TCP client/server or an mpi4py ping-pong
- :mod:`.core` – :func:`calibrate` ties them together into a :class:`pario.system.System`

``pario calibrate --target H0=/mnt/h0:hdd --target S0=/mnt/s0:ssd -o my.toml`` is the CLI.
"""

from .core import Calibration, Target, calibrate, parse_target
from .fit import Fit, check, fit_additive, fit_max
from .network import NetFit
from .storage import DEFAULT_SIZES, Samples, measure_target

__all__ = [
    "DEFAULT_SIZES",
    "Calibration",
    "Fit",
    "NetFit",
    "Samples",
    "Target",
    "calibrate",
    "check",
    "fit_additive",
    "fit_max",
    "measure_target",
    "parse_target",
]
