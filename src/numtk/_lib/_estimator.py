"""A minimal scikit-learn compatible estimator base (no scikit-learn import).

numtk's estimators follow scikit-learn's conventions (parameters stored unchanged in ``__init__``,
fitted attributes ending in ``_``) and support ``get_params``/``set_params``, so
:func:`sklearn.base.clone` and grid searches over parameters work, without making scikit-learn a
dependency of ``import numtk``.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["Estimator", "NotFittedError", "check_is_fitted"]


class NotFittedError(ValueError, AttributeError):
    """The estimator is used before ``fit`` (same bases as scikit-learn's NotFittedError)."""


class Estimator:
    """Base class: parameters are the keyword arguments of ``__init__``.

    Subclasses set ``_estimator_kind`` to ``"regressor"`` or ``"transformer"`` (or leave it None)
    and extend :meth:`__sklearn_tags__` where scikit-learn's defaults do not describe them.
    """

    _estimator_kind: str | None = None

    def __sklearn_tags__(self):
        """scikit-learn's estimator tags (required by scikit-learn >= 1.6; imported lazily)."""
        from sklearn.utils import InputTags, RegressorTags, Tags, TargetTags, TransformerTags

        kind = self._estimator_kind
        return Tags(
            estimator_type=kind,
            target_tags=TargetTags(required=kind == "regressor"),
            transformer_tags=TransformerTags() if kind == "transformer" else None,
            regressor_tags=RegressorTags() if kind == "regressor" else None,
            classifier_tags=None,
            input_tags=InputTags(),
        )

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values()
                if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The estimator's parameters, by name (scikit-learn's protocol)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> "Estimator":
        """Set parameters by name; unknown names raise ValueError. Returns self."""
        valid = set(self._param_names())
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; "
                                 f"valid parameters: {sorted(valid)}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        shown = []
        for name, value in self.get_params().items():
            default = defaults.get(name, inspect.Parameter.empty)
            try:
                same = value is default or bool(value == default)
            except Exception:  # arrays and other objects without a scalar ==
                same = False
            if not same:
                shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"


def check_is_fitted(estimator: Any, attribute: str, hint: str = "call fit first") -> None:
    """Raise :class:`NotFittedError` unless ``estimator`` has ``attribute`` (set by ``fit``).

    The error raised is also scikit-learn's ``sklearn.exceptions.NotFittedError`` (its estimator checks
    and users catch that class); scikit-learn is imported only when the error is raised.
    """
    if not hasattr(estimator, attribute):
        raise _not_fitted_error()(f"this {type(estimator).__name__} is not fitted yet; {hint}")


_NOT_FITTED: list[type] = []


def _not_fitted_error() -> type:
    """numtk's NotFittedError joined with scikit-learn's (built once, on the first error)."""
    if not _NOT_FITTED:
        try:
            from sklearn.exceptions import NotFittedError as SklearnNotFittedError
        except ImportError:  # pragma: no cover - scikit-learn is a required dependency
            _NOT_FITTED.append(NotFittedError)
        else:
            _NOT_FITTED.append(type("NotFittedError", (NotFittedError, SklearnNotFittedError),
                                    {"__module__": __name__, "__qualname__": "NotFittedError",
                                     "__doc__": NotFittedError.__doc__}))
    return _NOT_FITTED[0]
