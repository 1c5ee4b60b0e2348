"""The one result class of numtk."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

__all__ = ["Result", "SignificanceResult"]


class Result:
    """Named outputs of one computation, read as attributes (``res.order``).

    Behaves like :class:`scipy.optimize.OptimizeResult`: fields are attributes, ``keys()`` and
    ``res["name"]`` give dict-style access (so ``dict(res)`` works), and the repr shows one aligned
    row per field. Subclasses that promise SciPy-style unpacking set ``_fields``; then
    ``a, b = res`` and ``res[0]`` work too. A plain ``Result`` does not unpack.

    Examples
    --------
    >>> from numtk._lib import Result
    >>> res = Result(value=1.5, n_iter=3)
    >>> res.value
    1.5
    >>> sorted(res.keys())
    ['n_iter', 'value']
    >>> res
    Result(
       value: 1.5
      n_iter: 3
    )
    """

    _fields: tuple[str, ...] = ()

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __iter__(self) -> Iterator[Any]:
        if not self._fields:
            raise TypeError(f"{type(self).__name__} does not unpack; read its attributes "
                            f"({', '.join(self.__dict__)})")
        return (getattr(self, name) for name in self._fields)

    def __len__(self) -> int:
        if not self._fields:
            raise TypeError(f"{type(self).__name__} has no length; read its attributes")
        return len(self._fields)

    def __getitem__(self, key: str | int) -> Any:
        if isinstance(key, str):
            try:
                return self.__dict__[key]
            except KeyError:
                raise KeyError(key) from None
        return tuple(self)[key]

    def __contains__(self, key: object) -> bool:
        return key in self.__dict__

    def keys(self):
        """The field names, in insertion order."""
        return self.__dict__.keys()

    def values(self):
        return self.__dict__.values()

    def items(self):
        return self.__dict__.items()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        a, b = self.__dict__, other.__dict__
        if a.keys() != b.keys():
            return False
        return all(np.array_equal(a[k], b[k], equal_nan=_nan_ok(a[k])) for k in a)

    __hash__ = None  # mutable

    def __dir__(self):
        return list(self.__dict__) + [n for n in super().__dir__() if n not in self.__dict__]

    def __repr__(self) -> str:
        if not self.__dict__:
            return f"{type(self).__name__}()"
        width = max(map(len, self.__dict__))
        rows = []
        for k, v in self.__dict__.items():
            text = _format(v).replace("\n", "\n" + " " * (width + 4))
            rows.append(f"  {k:>{width}}: {text}")
        return f"{type(self).__name__}(\n" + "\n".join(rows) + "\n)"


def _nan_ok(v: Any) -> bool:
    try:
        return np.issubdtype(np.asarray(v).dtype, np.inexact)
    except Exception:  # pragma: no cover - exotic objects
        return False


def _format(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    if isinstance(v, np.ndarray):
        with np.printoptions(threshold=20, edgeitems=3, precision=6):
            return repr(v)
    return repr(v)


class SignificanceResult(Result):
    """Result of a hypothesis test: ``statistic`` and ``pvalue``; unpacks as ``stat, p = res``."""

    _fields = ("statistic", "pvalue")
