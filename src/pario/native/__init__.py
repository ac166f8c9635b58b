"""pario's C code: the RMT core (journal + in-memory index), shared by the Python store
(:mod:`pario.store.rmt`, through the extension ``pario.native._rmt``) and the C runtime of
MPI programs (``libpario_trace.so``).  Built when pario is installed (``pip install``: setup.py)
or, in a checkout, in place by ``scripts/setup.sh``; one build definition for both:
:mod:`pario.native.build`."""

from pathlib import Path


def build_hint() -> str:
    """What to do when a C product is missing, for an error message: in a checkout, its
    set-up script (which builds in place); an installed pario builds them when installed."""
    root = Path(__file__).resolve().parents[3]
    if (root / "scripts" / "setup.sh").is_file() and (root / "setup.py").is_file():
        return "run scripts/setup.sh in the checkout (it builds pario's C code in place)"
    return "reinstall pario with pip for this Python (installing builds its C code; that needs a C compiler)"


def extension():
    """The extension ``pario.native._rmt`` (the store engine, its RMT, the layout mapping, the
    collective orders), its errors raised as :class:`pario.ParioError`; a one-line ParioError
    when it is not built."""
    from .. import ParioError

    try:
        from . import _rmt
    except ImportError as exc:
        raise ParioError(f"pario's C extension is not built ({exc}): {build_hint()}") from None
    _rmt.set_error_class(ParioError)
    return _rmt
