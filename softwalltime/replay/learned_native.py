"""``learned``'s table with its two hot loops in C, where ``make compile`` built them.

:class:`NativeLearner` is :class:`~softwalltime.core.learned.Learner` with ``_add`` (one
ended job into the sums) and ``_best`` (the rule with the best score) run by the C module
``_learned_kernel`` (``_learned_kernel.c`` beside this file); every float is the one the
Python methods compute, so every table and choice is the same (``tests/test_learned_native.py``).
The replay's tables (``evaluate``, ``simulate``'s estimates and ranks, the prior, the
stored table) come from :func:`new_learner`: a NativeLearner where the module is built,
the plain Learner otherwise (a ``pip install`` of the pure wheel, the hook).
"""

from __future__ import annotations

import importlib
from typing import Any, Tuple

from ..core import learned


def _load() -> Any:
    """The C module, or ``None`` where it is not built (plain Python)."""
    try:
        return importlib.import_module(__package__ + "._learned_kernel")
    except ImportError:
        return None


kernel: Any = _load()


class NativeLearner(learned.Learner):
    """A Learner whose ``_add`` and ``_best`` run in C (the same floats)."""

    __slots__ = ()

    def _add(
        self, coarse: int, fine: int, softs: Tuple[int, ...], r: int, low: int, high: int
    ) -> None:
        kernel.add(*self._sums(fine, coarse), softs, r, low)

    def _best(
        self, fine: int, coarse: int, df: float, dc: float, ws: float, wc: float, lam: float
    ) -> int:
        best: int = kernel.best(*self._sums(fine, coarse), df, dc, ws, wc, lam)
        return best


def new_learner() -> learned.Learner:
    """An empty table: native where the kernel is built, plain Python otherwise."""
    return NativeLearner() if kernel is not None else learned.Learner()
