"""Warning categories of numtk."""

__all__ = ["NumtkWarning", "SmallSampleWarning"]


class NumtkWarning(UserWarning):
    """Base class of the warnings numtk issues."""


class SmallSampleWarning(NumtkWarning, RuntimeWarning):
    """A sample is too small for the statistic; the returned values are NaN.

    Mirrors SciPy's warning of the same name (same message), so code that filters on the
    message keeps working.
    """


TOO_SMALL_MESSAGE = (
    "One or more sample arguments is too small; all returned values will be NaN. "
    "See documentation for sample size requirements."
)
