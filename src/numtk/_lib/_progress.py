"""``progress=True``: a tqdm bar, imported only when asked for."""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["progress_bar"]


class _NoBar:
    """Stand-in with tqdm's small surface when no bar is wanted."""

    def __init__(self, iterable: Iterable | None = None, total: int | None = None, **_: Any) -> None:
        self._iterable = iterable
        self.total = total
        self.n = 0

    def __iter__(self):
        return iter(self._iterable if self._iterable is not None else ())

    def update(self, k: int = 1) -> None:
        self.n += k

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def progress_bar(iterable: Iterable | None = None, *, progress: bool | Any = False,
                 total: int | None = None, desc: str | None = None, **kwargs: Any):
    """A tqdm progress bar when ``progress`` is true, else a silent stand-in with the same methods.

    ``progress`` may also be a dict of extra tqdm keyword arguments. tqdm is imported only here, so
    it is needed only by users who ask for a bar; without it a clear ImportError says how to get it.

    Examples
    --------
    >>> from numtk._lib import progress_bar
    >>> sum(progress_bar(range(4), progress=False))
    6
    """
    if not progress:
        return _NoBar(iterable, total=total)
    from numtk._lib._optional import import_optional

    import_optional("tqdm", purpose="progress=True")
    from tqdm.auto import tqdm
    if isinstance(progress, dict):
        kwargs = {**kwargs, **progress}
    return tqdm(iterable, total=total, desc=desc, **kwargs)
