"""One registry per role: an explicit mapping name → class (scikit-learn style members).

pario's roles whose members are chosen by name — cost models (:data:`pario.model.MODELS`),
planners (:data:`pario.plan.PLANNERS`), emitters (:data:`pario.apply.EMITTERS`) and the store's
data planes (:data:`pario.store.PLANES`) — each have one such registry; the fifth role, the
collective request orders, is the C table ``pario_orders[]`` of ``native/collective/order.c``
that the engine, the simulator and the served runtime share (:data:`pario.plan.collective.ORDERS`
reads its names; tests/plan/test_order_contract.py checks every row).  Each is a
:class:`Registry`: a small mapping written out in one place, name → ``"module:Class"``,
imported on first use (loading a plan, what every MPI rank does, imports no planner).  Every
member follows its role's interface — parameters in the constructor, one verb
(``CostModel.trace_cost``, ``Planner.plan``, ``Emitter.emit``; a data plane ``Backend.configure``
and ``Backend.options``) — and its ``name`` is its key.
The CLI and ``pario advise`` pick members only through these registries; adding a member is
its module plus one line in its role's registry.  ``tests/test_contracts.py`` runs every
registered member through its role's contract (as scikit-learn's ``check_estimator``).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator, Mapping
from typing import Any

from . import ParioError


class Registry(Mapping):
    """name → member class of one role (``role``: "model", "planner", "emit target").

    ``members``: name → ``"package.module:Class"`` (imported on first use) or the class
    itself.  As a mapping it yields the classes; :meth:`get` and :meth:`create` are the
    user-facing look-ups (an unknown name or parameter is a one-line :class:`ParioError`)."""

    def __init__(self, role: str, members: Mapping[str, Any]):
        self.role = role
        self._members = dict(members)

    # ------------------------------------------------------------------ mapping
    def __getitem__(self, name: str) -> type:
        target = self._members[name]
        if isinstance(target, str):
            module, _, attr = target.partition(":")
            target = getattr(importlib.import_module(module), attr)
            self._members[name] = target
        return target

    def __iter__(self) -> Iterator[str]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, name) -> bool:
        return name in self._members

    def __repr__(self) -> str:
        return f"Registry({self.role!r}, {list(self._members)})"

    # ------------------------------------------------------------------ look-ups
    def known(self) -> str:
        return ", ".join(self._members)

    def get(self, name, default=None):
        """The class registered as ``name``; an unknown name is a :class:`ParioError` unless a
        ``default`` is given."""
        key = str(name).strip().lower() if isinstance(name, str) else name
        if key not in self._members:
            if default is not None:
                return default
            raise ParioError(f"unknown {self.role} {name!r} (known: {self.known()})")
        return self[key]

    def create(self, name, **params):
        """An instance of the member ``name`` with ``params`` (constructor keyword arguments);
        a parameter the member does not take is a :class:`ParioError`."""
        cls = self.get(name)
        check_params(cls, params, f"{self.role} {cls.name!r}")
        return cls(**params)

    # ------------------------------------------------------------------ extension
    def register(self, name: str, target) -> None:
        """Add a member (``"module:Class"`` or a class whose ``name`` is ``name``)."""
        if not isinstance(target, str) and getattr(target, "name", name) != name:
            raise ValueError(f"{self.role} {name!r}: the class's name is {target.name!r}")
        self._members[name] = target

    def unregister(self, name: str) -> None:
        del self._members[name]


def check_params(cls, params: Mapping[str, Any], what: str) -> None:
    """Refuse constructor parameters ``cls`` does not take (one line: the first unknown one
    and the known ones)."""
    known = getattr(cls, "defaults", None)
    if known is None:
        sig = inspect.signature(cls.__init__)
        if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
            return
        known = [p for p in sig.parameters if p != "self"]
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ParioError(f"{what}: unknown parameter {unknown[0]!r} (known: {', '.join(sorted(known)) or 'none'})")
