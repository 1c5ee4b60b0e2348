"""Run a function on P processes of one machine joined by a torch.distributed process group.

:func:`run_distributed` is what the tests and benchmarks of the distributed pieces of the bridge use: it
spawns the processes with :mod:`torch.multiprocessing` (the ``spawn`` start method), joins them in one
group over TCP on a free local port, runs the function in each, and returns every rank's value, or raises
the error of the rank that failed first (its remote traceback chained), or a TimeoutError when the ranks do
not finish in time. No process outlives the call.
"""

from __future__ import annotations

import datetime
import functools
import importlib
import importlib.util
import os
import pickle
import queue as queue_mod
import socket
import sys
import time
import traceback
import types
from typing import Any, Callable

from numtk._lib._constraints import constraints
from numtk._lib._validation import check_int, check_option, check_real
from numtk.torch._common import torch

__all__ = ["run_distributed", "MAX_WORLD_SIZE"]

#: at most this many processes (each imports torch: hundreds of MB)
MAX_WORLD_SIZE = 256

#: seconds the parent waits for the other ranks' errors once one rank failed
_ERROR_GRACE = 1.0


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a spawned rank (chained as the ``__cause__`` of the error
    that :func:`run_distributed` re-raises)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return self.text


class _ByName:
    """A module-level function, pickled as (module, qualified name, file): the spawned child imports the
    module, or, when that fails (a script or a test file that is not importable by its module name there),
    loads it from its file."""

    def __init__(self, fn: types.FunctionType) -> None:
        self.module = fn.__module__
        self.qualname = fn.__qualname__
        mod = sys.modules.get(self.module)
        self.file = getattr(mod, "__file__", None)

    def load(self) -> Callable[..., Any]:
        try:
            mod = importlib.import_module(self.module)
        except ImportError:
            if not self.file:
                raise
            spec = importlib.util.spec_from_file_location(self.module, self.file)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[self.module] = mod
            spec.loader.exec_module(mod)
        obj: Any = mod
        for part in self.qualname.split("."):
            obj = getattr(obj, part)
        return obj


def _portable(fn: Any) -> Any:
    """``fn`` in a form the spawned children can rebuild (see :class:`_ByName`)."""
    if isinstance(fn, types.FunctionType):
        if "<locals>" in fn.__qualname__ or "<lambda>" in fn.__qualname__:
            raise TypeError(f"`fn` must be a module-level function (the spawned processes find it by name); "
                            f"got {fn.__qualname__}")
        return _ByName(fn)
    if isinstance(fn, functools.partial):
        return functools.partial(_call_partial, _portable(fn.func), fn.args, fn.keywords)
    try:
        pickle.dumps(fn)
    except Exception as exc:
        raise TypeError(f"`fn` must be picklable (it is sent to spawned processes): {exc}") from None
    return fn


def _call_partial(target: Any, args: tuple, keywords: dict, *more: Any) -> Any:
    func = target.load() if isinstance(target, _ByName) else target
    return func(*args, *more, **keywords)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dump_error(exc: BaseException) -> bytes:
    try:
        blob = pickle.dumps(exc)
        pickle.loads(blob)
        return blob
    except Exception:
        return pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))


def _worker(rank: int, world_size: int, port: int, backend: str, timeout: float, threads: int, fn: Any,
            args: tuple, results: Any) -> None:  # pragma: no cover - runs in the spawned processes
    import torch.distributed as dist

    torch.set_num_threads(threads)
    try:
        func = fn.load() if isinstance(fn, _ByName) else fn
        if backend == "nccl":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout))
        value = func(*args)
        message = (rank, True, pickle.dumps(value), "")
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
        message = (rank, False, _dump_error(exc), traceback.format_exc())
    results.put(message)
    if dist.is_initialized():
        dist.destroy_process_group()


@constraints(fn="callable", world_size="count", backend="option", timeout="real>0", threads="int>=1")
def run_distributed(fn: Callable[..., Any], world_size: int, *args: Any, backend: str = "gloo",
                    timeout: float = 300.0, threads: int | None = None) -> list[Any]:
    """Run ``fn(*args)`` on ``world_size`` processes joined by a torch.distributed process group.

    Each process is spawned with :mod:`torch.multiprocessing`, joins the default process group (rank
    ``0..world_size-1``, TCP rendezvous on a free port of 127.0.0.1) and calls ``fn(*args)``; inside,
    :func:`torch.distributed.get_rank` tells the rank.

    Parameters
    ----------
    fn : callable
        A module-level function (found by name in the spawned processes; a function of a script or a test
        file is loaded from its file there), a :func:`functools.partial` of one, or a picklable callable.
        Its return value must be picklable.
    world_size : int
        The number of processes P, at most 256.
    *args
        Passed to ``fn`` on every rank (pickled).
    backend : {"gloo", "nccl"}, optional
        The torch.distributed backend. ``"gloo"`` (CPU tensors) is the tested one; ``"nccl"`` puts rank r
        on GPU ``r % torch.cuda.device_count()`` and is untested.
    timeout : float, optional
        Seconds the whole run may take, at most 1e6; also the timeout of every collective operation.
    threads : int, optional
        Intra-op threads of each process (:func:`torch.set_num_threads`); default the CPU count divided by
        ``world_size`` (at least 1), so that the ranks do not oversubscribe the cores.

    Returns
    -------
    list
        ``fn``'s return value on each rank, in rank order.

    Raises
    ------
    Exception
        The exception a rank raised (the first to arrive when several fail: the others are usually its
        consequence), with the remote traceback as its ``__cause__``.
    TimeoutError
        If the ranks do not all finish within ``timeout`` seconds (they are then terminated).
    RuntimeError
        If a process dies without reporting (killed, out of memory).

    Examples
    --------
    >>> import torch.distributed as dist
    >>> from numtk.torch.llep import run_distributed
    >>> run_distributed(dist.get_world_size, 2)
    [2, 2]
    """
    if not callable(fn):
        raise TypeError(f"`fn` must be callable; got {type(fn).__name__}")
    world_size = check_int(world_size, "world_size", minimum=1, maximum=MAX_WORLD_SIZE)
    backend = check_option(backend, "backend", ("gloo", "nccl"))
    timeout = check_real(timeout, "timeout", low=0.0, low_open=True, high=1e6)
    if threads is None:
        threads = max(1, (os.cpu_count() or 1) // world_size)
    threads = check_int(threads, "threads", minimum=1, maximum=4096)
    if backend == "nccl" and not torch.cuda.is_available():
        raise ValueError("`backend` 'nccl' needs CUDA devices; none is available here")
    target = _portable(fn)
    try:
        pickle.dumps(args)
    except Exception as exc:
        raise TypeError(f"`args` must be picklable (they are sent to spawned processes): {exc}") from None

    ctx = torch.multiprocessing.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(rank, world_size, port, backend, timeout, threads, target, args,
                                               results), daemon=True)
             for rank in range(world_size)]
    values: dict[int, Any] = {}
    errors: dict[int, tuple[BaseException, str]] = {}
    deadline = time.monotonic() + timeout
    first_error: float | None = None
    try:
        for p in procs:
            p.start()
        while len(values) + len(errors) < world_size:
            now = time.monotonic()
            if first_error is not None and now > first_error + _ERROR_GRACE:
                break
            if now > deadline:
                pending = sorted(set(range(world_size)) - set(values) - set(errors))
                if errors:
                    break
                raise TimeoutError(f"run_distributed: rank(s) {pending} of {world_size} did not finish within "
                                   f"`timeout` = {timeout:g} s")
            try:
                rank, ok, blob, text = results.get(timeout=0.05)
            except queue_mod.Empty:
                dead = [r for r, p in enumerate(procs)
                        if not p.is_alive() and r not in values and r not in errors]
                if dead:
                    # the message of a process that just exited may still be in the pipe
                    try:
                        rank, ok, blob, text = results.get(timeout=1.0)
                    except queue_mod.Empty:
                        codes = {r: procs[r].exitcode for r in dead}
                        raise RuntimeError(f"run_distributed: rank(s) {dead} died without reporting (exit "
                                           f"codes {codes})") from None
                else:
                    continue
            if ok:
                values[rank] = pickle.loads(blob)
            else:
                errors[rank] = (pickle.loads(blob), text)
                if first_error is None:
                    first_error = time.monotonic()
        if errors:
            # the first error to arrive: the others are usually its consequence (a peer closed its connection)
            rank = next(iter(errors))
            exc, text = errors[rank]
            others = f"; rank(s) {sorted(set(errors) - {rank})} failed too" if len(errors) > 1 else ""
            raise exc from RemoteTraceback(f"\n(rank {rank} of {world_size}{others})\n{text}")
        return [values[r] for r in range(world_size)]
    finally:
        for p in procs:
            if p.is_alive():
                p.join(timeout=2.0 if not errors else 0.2)
            if p.is_alive():
                p.terminate()
                p.join(timeout=2.0)
            if p.is_alive():
                p.kill()
                p.join()
        results.close()
        results.join_thread()
