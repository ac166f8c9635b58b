"""``pario apply PLAN --emit lustre|beegfs|orangefs|cephfs [--system P] [--root DIR] [--absolute-names]
[-o FILE] [--json]``: print the commands that put a plan's layouts (and replicas, where the
target has them) in place on a parallel file system, and say per file what was exact and
what was not (:mod:`pario.apply`, docs/emit.md).

Without ``-o`` the script goes to stdout and one summary line per layout / replica to
stderr; with ``-o FILE`` the script goes to FILE (mode 0755) and the summary to stdout;
``--json`` prints the emission (commands and report) as JSON.  A plan whose file names are
not names, leave ``--root``, or are absolute without ``--absolute-names`` is refused as a
whole (:mod:`pario.names`; one line, exit 2, nothing written).

``pario apply PLAN --cephfs CLUSTER_DIR [--root SUBDIR] [--absolute-names]``: run the CephFS
commands on the CephFS of a ``pario cluster`` and read every layout back
(:mod:`pario.apply.cephfs_live`)."""

from __future__ import annotations

import os
import sys

from .. import ParioError
from .common import print_json


def register(sub) -> None:
    p = sub.add_parser("apply", help="emit the commands that apply a plan on Lustre, BeeGFS, OrangeFS or CephFS",
                       description="Emit the commands that put PLAN's layouts in place on a parallel file system, "
                                   "with a report per file of what is exact, what the target cannot express and "
                                   "what was emitted instead (docs/emit.md).")
    p.add_argument("plan", metavar="PLAN.json", help="a plan written by 'pario advise -o'")
    p.add_argument("--emit", default=None, metavar="TARGET", help="lustre, beegfs, orangefs or cephfs")
    p.add_argument("--cephfs", default=None, metavar="CLUSTER_DIR",
                   help="set the layouts on the CephFS of this 'pario cluster' and read them back "
                        "(--root: a directory under its mount)")
    p.add_argument("--system", default=None, metavar="P",
                   help="the plan's system profile (default: the built-in profile the plan names)")
    p.add_argument("--root", default=".", metavar="DIR",
                   help="directory of the plan's relative file names and of its '*' layout (default .)")
    p.add_argument("--absolute-names", action="store_true",
                   help="allow the plan's absolute file names (refused by default: a plan's names are taken "
                        "relative to --root and may not leave it)")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="write the script to FILE")
    p.add_argument("--json", action="store_true", help="print the commands and the report as JSON")
    p.set_defaults(func=_apply)


def _report_line(it) -> str:
    """One line per item: what was emitted for it (control characters escaped)."""
    from ..names import printable

    extra = "; ".join(f"{d['aspect']}: {d['instead']}" for d in it.inexact)
    return printable(f"{it.file}: {it.what} {it.plan}: {it.status}" + (f" ({extra})" if extra else ""))


def _apply(args) -> int:
    from ..apply import TARGETS, get_emitter, load_plan

    if args.cephfs and args.emit:
        raise ParioError("give --emit TARGET or --cephfs CLUSTER_DIR, not both")
    if args.cephfs:
        return _apply_live(args)
    if not args.emit:
        raise ParioError(f"give --emit TARGET ({', '.join(TARGETS)}) or --cephfs CLUSTER_DIR")
    emitter = get_emitter(args.emit, root=args.root, absolute_names=args.absolute_names)   # before the plan is read
    plan, system = load_plan(args.plan, args.system)
    em = emitter.emit(plan, system)
    if args.output:
        with open(args.output, "w") as fh:
            fh.write(em.script())
        os.chmod(args.output, 0o755)
    if args.json:
        print_json({**em.to_dict(), "script": None if args.output else em.script(), "output": args.output})
        return 0
    if not args.output:
        sys.stdout.write(em.script())
    report = sys.stdout if args.output else sys.stderr
    for it in em.items:
        print(_report_line(it), file=report)
    if args.output:
        print(f"wrote {args.output}: {len(em.commands())} commands for {em.target}", file=report)
    return 0


def _apply_live(args) -> int:
    from ..apply import load_plan
    from ..apply.cephfs_live import apply_cephfs

    plan, system = load_plan(args.plan, args.system)
    res = apply_cephfs(plan, system, args.cephfs, subdir=args.root, absolute_names=args.absolute_names)
    if args.json:
        print_json(res.to_dict())
        return 0 if res.ok else 1
    for it in res.emission.items:
        print(_report_line(it))
    for path, v in res.files.items():
        same = v["set"] == v["read"]
        print(f"{path}: layout {' '.join(f'{k}={x}' for k, x in v['read'].items())}"
              + ("" if same else f" (set {v['set']}: DIFFERENT)"))
    print(f"{len(res.files)} file layout(s) set on CephFS, "
          + ("every one read back equal" if res.ok else "NOT all read back equal"))
    return 0 if res.ok else 1
