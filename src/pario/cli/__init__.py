"""The ``pario`` command line.

Each command group lives in its own module under :mod:`pario.cli` and exposes
``register(subparsers)``; :data:`COMMAND_MODULES` lists them in the order they appear in
``pario --help``.  Every :class:`pario.ParioError` (and any bad input, and any
operating-system error on a user's path: a full disk, a missing directory, no permission)
ends as one line on stderr and exit status 2 (``--verbose`` adds an error's details); an
unexpected exception also ends as one line (exit 1) unless ``PARIO_DEBUG=1`` is set, which
shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from .. import ParioError, __version__

COMMAND_MODULES = (
    "demo",
    "trace_cmd",
    "workload_cmd",
    "system_cmd",
    "layout_cmd",
    "model_cmd",
    "advise_cmd",
    "simulate_cmd",
    "store_cmd",
    "replicate_cmd",
    "apply_cmd",
    "run_cmd",
    "calibrate_cmd",
    "testbed_cmd",
    "cluster_cmd",
    "bench_cmd",
    "reproduce_cmd",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line "pario: error: …", exit 2 (argparse's convention)
        sub = self.prog.split(" ", 1)[1] + ": " if " " in self.prog else ""
        self.exit(2, f"pario: error: {sub}{message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pario",
        description="pario: trace an application's I/O, model its cost on HDD/SSD file servers, plan better "
                    "layouts, partial replicas and collective-I/O order, and apply them.",
        epilog="Sizes take IOR suffixes (64k, 4m, 1g). Set PARIO_DEBUG=1 to see tracebacks. Docs: docs/.")
    parser.add_argument("--version", action="version", version=f"pario {__version__}")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="print the details of an error (e.g. a damaged database's integrity report)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{name}":
                continue  # command group not built yet
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    verbose = bool(getattr(args, "verbose", False) or os.environ.get("PARIO_DEBUG"))
    try:
        rc = args.func(args)
    except ParioError as exc:
        print(f"pario: error: {_one_line(str(exc))}", file=sys.stderr)
        if verbose and exc.details:
            print(exc.details.rstrip(), file=sys.stderr)
        return 2
    except BrokenPipeError:     # stdout closed early (`pario … | head`): quietly, as other tools
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        except OSError:
            pass
        return 0
    except OSError as exc:      # a user's path or device (ENOSPC, EACCES, ENOENT, EROFS …): one line
        if os.environ.get("PARIO_DEBUG"):
            raise
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"pario: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pario: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - last resort: still one line
        if os.environ.get("PARIO_DEBUG"):
            raise
        print(f"pario: internal error: {type(exc).__name__}: {exc} (set PARIO_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return 1
    return int(rc or 0)


def _one_line(msg: str) -> str:
    """An error message as one line (a library's multi-line text folded)."""
    return " ".join(part.strip() for part in msg.strip().splitlines() if part.strip()) or "(no message)"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
