"""Parameter constraints declared as data, next to the function they describe.

Every public callable of numtk states, per parameter, which values it accepts, in a small fixed
vocabulary (in the spirit of scikit-learn's ``validate_params``)::

    @constraints(n="count", rng="rng", workers="workers")
    def random_game_of_skill(n, *, rng=None, workers=1): ...

The declaration changes nothing at run time: the function still validates its arguments inline
(the messages name the parameter and say what was expected). What the declaration buys is that one
common test reads it for every public callable, generates values that break each constraint and
checks that each gets a ValueError or TypeError naming the parameter (``tests/fuzz/``), and that a
test fails when a public callable has a parameter without a declaration.

A declaration maps a parameter name to a category of :data:`CATEGORIES` or a tuple of them (the
value may be in any one of them: ``("real>0", "option")`` for a number or a keyword such as
``'auto'``). Classes declare their constructor's parameters with the same decorator on the class.
Keys of an ``options=`` mapping can be declared too, under ``"options.<key>"``.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Callable, Mapping, TypeVar

__all__ = ["CATEGORIES", "constraints", "declared_constraints"]

#: The vocabulary: category -> what a valid value is.
CATEGORIES: Mapping[str, str] = MappingProxyType({
    "int>=0": "an int >= 0 (not a bool; NumPy integers accepted)",
    "int>=1": "an int >= 1",
    "int>=2": "an int >= 2",
    "count": "an int >= 1 that sizes work or output (bounded by memory and C int range)",
    "cap": "an int >= 1 that bounds an iteration or a size and allocates nothing itself",
    "index": "an int position; negative values count from the end",
    "real": "a finite real number",
    "real>0": "a finite real number > 0",
    "real>=0": "a finite real number >= 0",
    "prob": "a real number in [0, 1]",
    "prob_open": "a real number in (0, 1)",
    "bool": "True or False (NumPy bools accepted)",
    "workers": "an int (-1 for every core, else 1..max_workers()) or a map-like callable",
    "rng": "None, an int seed >= 0, or a numpy.random.Generator",
    "option": "one of a documented set of values (strings, or objects of a documented type)",
    "callable": "a callable (or None where the default is None)",
    "array1d": "a 1-D array-like of finite real numbers",
    "array2d": "a 2-D array-like of finite real numbers",
    "tensor": "a torch.Tensor of finite floating-point numbers (numtk.torch; the shape its docstring gives)",
    "mapping": "a dict with str keys (None where the default is None), e.g. ``options=``",
    "path": "a str or os.PathLike naming a file",
    "any": "any object: the parameter is not checked (its docstring says why)",
})

F = TypeVar("F", bound=Callable[..., Any])


def constraints(**params: str | tuple[str, ...]) -> Callable[[F], F]:
    """Declare the accepted values of a callable's parameters (see the module docstring).

    Raises
    ------
    ValueError
        If a category is not one of :data:`CATEGORIES` (checked when the module is imported).
    """
    table: dict[str, tuple[str, ...]] = {}
    for name, cats in params.items():
        cats = (cats,) if isinstance(cats, str) else tuple(cats)
        unknown = [c for c in cats if c not in CATEGORIES]
        if not cats or unknown:
            raise ValueError(f"constraint of {name!r}: unknown categories {unknown or cats!r}; "
                             f"known: {sorted(CATEGORIES)}")
        table[name] = cats

    def attach(obj: F) -> F:
        obj.__numtk_constraints__ = MappingProxyType(table)  # type: ignore[attr-defined]
        return obj

    return attach


def declared_constraints(obj: Any) -> Mapping[str, tuple[str, ...]]:
    """The declaration of a callable (a function, method or class); empty if it has none.

    A class's declaration is its own, not a base class's.
    """
    if isinstance(obj, type):
        return obj.__dict__.get("__numtk_constraints__", MappingProxyType({}))
    return getattr(obj, "__numtk_constraints__", MappingProxyType({}))
