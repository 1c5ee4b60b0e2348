"""Bad-input fuzzing of the public API, each call in a child process.

A *case* is one public callable with a valid call (``make()`` returns ``(func, args, kwargs)``) and
the constraints of its parameters: ``params`` maps a parameter name to the categories of values it
accepts (``"int>=1"``, ``"count"``, ``"cap"``, ``"real"``, ``"array2d"``, ...;
an ``"int>=1"`` must also refuse absurd values such as 2**63, a ``"cap"`` such as a rank ceiling must
take them). For every category the catalogue below holds
values that violate it (``INVALID``: they must raise a ValueError or TypeError that names the
parameter) and values at its edges (``EDGE``: an empty or one-element array, ties, huge values; the
call may succeed, but then with a finite result, or raise such an error). Values are written as
Python expressions and evaluated in the child, so a crash, a hang or an absurd allocation is seen
by the parent instead of killing pytest.

Outcomes, per call: ``clear`` (ValueError/TypeError naming the parameter, an OSError naming the
parameter that gave the path, or an ImportError naming the extra to install), ``ok`` (returned, finite),
``accepted`` (an invalid value returned normally: silently accepted), ``nonfinite`` (returned NaN/inf),
``unclear`` (another exception, or a message not naming the parameter), ``memory`` (MemoryError under
the child's address-space limit), ``crash`` (the child died) and ``hang`` (it ran past the deadline).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent

# --------------------------------------------------------------------------------------------------
# the catalogue: category -> expressions (evaluated with numpy as np)
# --------------------------------------------------------------------------------------------------
_WRONG_TYPES = ["object()", "'x'", "[1, 'a']", "{'a': 1}"]
_BIG_INTS = ["2**31", "2**63", "10**12"]
INVALID: dict[str, list[str]] = {
    "int>=0": ["-1", "1.5", "float('nan')", "True", *_WRONG_TYPES[:2], "2**63", "10**12"],
    "int>=1": ["0", "-1", "1.5", "float('nan')", "True", *_WRONG_TYPES[:2], "2**63", "10**12"],
    "int>=2": ["1", "0", "-1", "1.5", "True", "'x'", "2**63", "10**12"],
    "count": ["0", "-1", "1.5", "True", "'x'", "2**63", "10**12"],  # a size of work or output
    "cap": ["0", "-1", "1.5", "True", "'x'"],  # an upper bound (>= 1) that allocates nothing itself
    "index": ["1.5", "True", "'x'", "2**63", "-(2**63)"],  # a position; negative counts from the end
    "real": ["float('nan')", "float('inf')", "complex(1, 1)", "'x'", "True"],
    "real>0": ["0.0", "-1.0", "float('nan')", "float('inf')", "complex(1, 1)", "'x'"],
    "real>=0": ["-1.0", "float('nan')", "float('inf')", "complex(1, 1)", "'x'"],
    "prob": ["-0.1", "1.5", "float('nan')", "'x'"],            # in [0, 1]
    "prob_open": ["0.0", "1.0", "-0.1", "1.5", "float('nan')", "'x'"],  # in (0, 1)
    "bool": ["'yes'", "2", "None"],
    "workers": ["0", "-2", "4096", "2**31", "1.5", "'x'", "True"],
    "rng": ["'x'", "-1", "1.5", "object()"],
    "option": ["'no-such-option'", "3", "None"],
    "callable": ["5", "'x'"],
    "array1d": ["np.full(5, np.nan)", "np.full(5, np.inf)", "np.ones((3, 3, 3))", "np.ones(5, complex)",
                "np.array(['a', 'b', 'c'])", "[[1.0, 2.0], [3.0]]", "object()"],
    "array2d": ["np.full((6, 3), np.nan)", "np.full((6, 3), np.inf)", "np.ones(6)", "np.ones((2, 3, 4))",
                "np.ones((6, 3), complex)", "np.array([['a', 'b']] * 3)", "[[1.0, 2.0], [3.0]]", "object()"],
    # torch tensors (numtk.torch): not a tensor, non-finite, integer or complex, a dimension too many
    "tensor": ["np.ones((6, 3))", "torch.full((6, 3), float('nan'))", "torch.full((6, 3), float('inf'))",
               "torch.ones((6, 3), dtype=torch.int64)", "torch.ones((6, 3), dtype=torch.complex64)",
               "torch.ones((2, 3, 4, 5))", "[[1.0, 2.0], [3.0, 4.0]]"],
    "mapping": ["5", "'x'", "{1: 2}"],
    "path": ["5", "object()"],
    "any": [],  # declared as accepting anything: nothing to break
}
EDGE: dict[str, list[str]] = {
    "int>=0": ["0"],
    "int>=1": ["1"],
    "count": ["1"],
    "cap": ["1", "2**63", "10**12"],
    "index": ["0", "-1"],
    "real": ["1e308", "-1e308", "0.0"],
    "real>0": ["1e-308", "1e308"],
    "real>=0": ["0.0", "1e308"],
    "array1d": ["np.array([])", "np.array([1.0])", "np.zeros(5)", "np.full(5, 1e308)", "np.full(5, 1e-308)",
                "np.arange(10.0)[::2]", "np.arange(5, dtype='>f8')", "np.arange(5, dtype=np.int32)"],
    "array2d": ["np.zeros((0, 3))", "np.ones((1, 3))", "np.zeros((6, 3))", "np.full((6, 3), 1e308)",
                "np.full((6, 3), 1e-308)", "np.ones((6, 0))", "np.asfortranarray(np.arange(18.0).reshape(6, 3))",
                "np.arange(18, dtype='>f8').reshape(6, 3)", "np.tile(np.arange(3.0), (6, 1))"],
    "tensor": ["torch.zeros((0, 3))", "torch.ones((1, 3))", "torch.zeros((6, 3))",
               "torch.arange(36.0).reshape(6, 6)[:, ::2]", "torch.ones((6, 3), dtype=torch.float64)"],
}


@dataclass
class Case:
    """One public callable under fuzzing."""

    name: str                                    # "numtk.stats.kendall_tau"
    make: Callable[[], tuple[Callable, tuple, dict]]
    params: dict[str, str | tuple[str, ...]]     # parameter -> category (or categories)
    positional: dict[str, int] = field(default_factory=dict)  # parameter -> index in args
    skip: dict[str, tuple[str, ...]] = field(default_factory=dict)  # parameter -> expressions not to try
    timeout: float = 30.0
    # Whether the callable's declared constraints (numtk._lib._constraints) are fuzzed by this case
    # as well as ``params``; None: yes for the first case of each callable (test_fuzz._load sets it).
    declared: bool | None = None


def base_name(case_name: str) -> str:
    """``numtk.games.psro[kuhn]`` -> ``numtk.games.psro``."""
    return case_name.split("[")[0]


def resolve(name: str) -> Any:
    """The public object a case's base name names: ``numtk.games.KuhnPoker.random_policy`` -> the
    function (as found on the class, so a classmethod or staticmethod gives its function)."""
    import importlib
    import inspect

    parts = name.split(".")
    obj = importlib.import_module(".".join(parts[:2]))
    for i, part in enumerate(parts[2:]):
        obj = inspect.getattr_static(obj, part) if isinstance(obj, type) else getattr(obj, part)
    return getattr(obj, "__func__", obj)


def declared_params(case: Case) -> dict[str, tuple[str, ...]]:
    """The declared constraints of the case's callable (parameters and ``options.<key>`` entries)."""
    from numtk._lib._constraints import declared_constraints

    return dict(declared_constraints(resolve(base_name(case.name))))


def params_of(case: Case) -> dict[str, tuple[str, ...]]:
    """The case's parameters and categories: the declared ones (when ``case.declared``), then the
    case's own ``params``, which take precedence (a method variant may narrow a category)."""
    out: dict[str, tuple[str, ...]] = {}
    if case.declared:
        out.update(declared_params(case))
    for p, cats in case.params.items():
        out[p] = (cats,) if isinstance(cats, str) else tuple(cats)
    return out


def calls_of(case: Case) -> list[tuple[str, str, str]]:
    """Every (parameter, expression, 'invalid' | 'edge') of the case's catalogue."""
    out = []
    for p, cats in params_of(case).items():
        seen = set()
        for cat in cats:
            for kind, table in (("invalid", INVALID), ("edge", EDGE)):
                for expr in table.get(cat, []):
                    if expr in seen or expr in case.skip.get(p, ()):
                        continue
                    seen.add(expr)
                    out.append((p, expr, kind))
    return out


# --------------------------------------------------------------------------------------------------
# the child
# --------------------------------------------------------------------------------------------------
def _finite(obj: Any, depth: int = 0) -> bool:
    import numbers

    import numpy as np

    if depth > 4 or obj is None or isinstance(obj, (str, bytes, bool)):
        return True
    if isinstance(obj, np.ndarray):
        return obj.dtype.kind not in "fc" or bool(np.isfinite(obj).all())
    if type(obj).__module__.startswith("torch") and hasattr(obj, "is_floating_point"):  # a torch.Tensor
        return not (obj.is_floating_point() or obj.is_complex()) or bool(obj.detach().isfinite().all())
    if isinstance(obj, numbers.Number):
        return bool(np.isfinite(complex(obj)))
    if isinstance(obj, dict):
        return all(_finite(v, depth + 1) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(_finite(v, depth + 1) for v in obj[:64])
    if hasattr(obj, "keys") and hasattr(obj, "__getitem__"):  # numtk Result
        try:
            return all(_finite(obj[k], depth + 1) for k in obj.keys())
        except Exception:
            return True
    return True


def _classify(case: Case, param: str, expr: str, kind: str) -> tuple[str, str]:
    import numpy as np

    func, args, kwargs = case.make()
    names = {"np": np, "inf": float("inf"), "nan": float("nan")}
    if "torch." in expr:  # the bridge's tensors (torch is imported only where a case needs it)
        import torch

        names["torch"] = torch
    value = eval(expr, names)
    args = list(args)
    if param.startswith("options."):  # a key of the options= mapping
        param = param.removeprefix("options.")
        kwargs = {**kwargs, "options": {**(kwargs.get("options") or {}), param: value}}
    elif param in case.positional:
        args[case.positional[param]] = value
    else:
        kwargs = {**kwargs, param: value}
    try:
        result = func(*args, **kwargs)
    except MemoryError as e:
        return "memory", str(e)[:200]
    except (ValueError, TypeError) as e:
        msg = str(e)
        if param in msg:
            return "clear", msg[:200]
        return "unclear", f"{type(e).__name__}: {msg[:200]}"
    except ImportError as e:
        return "clear", str(e)[:200]
    except OSError as e:  # a file that is not there, named by the parameter that gave it
        if param in str(e):
            return "clear", str(e)[:200]
        return "unclear", f"{type(e).__name__}: {str(e)[:200]}"
    except Exception as e:  # noqa: BLE001 - the point is to see which
        return "unclear", f"{type(e).__name__}: {str(e)[:200]}"
    if not _finite(result):
        return "nonfinite", repr(result)[:200]
    return ("accepted" if kind == "invalid" else "ok"), ""


def child_main(module: str, case_name: str) -> None:  # pragma: no cover - runs in the child
    import importlib.util
    import resource
    import warnings

    # An absurd allocation becomes a MemoryError under this address-space limit. AddressSanitizer
    # reserves terabytes of shadow memory, so a sanitized run sets NUMTK_FUZZ_MEMORY=0 and caps
    # allocations through ASAN_OPTIONS instead (.ci/sanitize).
    limit = int(os.environ.get("NUMTK_FUZZ_MEMORY", str(6 * 2**30)))
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    warnings.simplefilter("ignore")
    spec = importlib.util.spec_from_file_location("fuzz_cases", HERE / f"{module}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_cases"] = mod
    spec.loader.exec_module(mod)
    case = mod.CASES[case_name]
    # The answers go out on a private copy of stdout; whatever a library prints itself (LAPACK's
    # "parameter 4 illegal value", a C++ warning) goes to stderr instead of into the protocol.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        param, expr, kind = json.loads(line)
        print(json.dumps(["start"]), file=answers, flush=True)
        outcome, detail = _classify(case, param, expr, kind)
        print(json.dumps([outcome, detail]), file=answers, flush=True)


# --------------------------------------------------------------------------------------------------
# the parent
# --------------------------------------------------------------------------------------------------
def run_case(module: str, case: Case, calls: list[tuple[str, str, str]] | None = None) -> list[dict]:
    """Run every call of ``case`` in a child process (restarted after a crash or a hang)."""
    import queue
    import threading
    import time

    calls = calls_of(case) if calls is None else calls
    results: list[dict] = []
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    i = 0
    while i < len(calls):
        child = subprocess.Popen([sys.executable, str(HERE / "_harness.py"), module, case.name],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=env, bufsize=1)
        lines: queue.Queue = queue.Queue()

        def pump(stream, tag):
            for line in stream:
                lines.put((tag, line))
            lines.put((tag, None))

        errors: list[str] = []
        threading.Thread(target=pump, args=(child.stdout, "out"), daemon=True).start()
        threading.Thread(target=lambda: errors.extend(child.stderr), daemon=True).start()
        try:
            while i < len(calls):
                param, expr, kind = calls[i]
                child.stdin.write(json.dumps([param, expr, kind]) + "\n")
                child.stdin.flush()
                deadline = time.monotonic() + case.timeout + 60.0  # + interpreter start on the first call
                got = None
                while got is None:
                    try:
                        _, line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                    except queue.Empty:
                        got = ["hang", f"no answer in {case.timeout:.0f} s"]
                        break
                    if line is None:  # the child closed its answers: it died (or is dying)
                        try:
                            code = child.wait(timeout=10)
                        except subprocess.TimeoutExpired:
                            code = "none (closed its output)"
                        time.sleep(0.1)
                        got = ["crash", f"exit {code}: {''.join(errors)[-300:]}"]
                        break
                    try:
                        msg = json.loads(line)
                    except ValueError:  # not an answer: something else wrote to the answers' pipe
                        continue
                    if msg[0] == "start":
                        deadline = time.monotonic() + case.timeout
                        continue
                    got = msg
                results.append(dict(case=case.name, param=param, value=expr, kind=kind, outcome=got[0],
                                    detail=got[1]))
                i += 1
                if got[0] in ("hang", "crash"):
                    break
        finally:
            child.kill()
            child.wait()
            child.stdin.close()
    return results


BAD_OUTCOMES = ("accepted", "nonfinite", "unclear", "memory", "crash", "hang")


def failures(results: list[dict]) -> list[dict]:
    return [r for r in results if r["outcome"] in BAD_OUTCOMES]


def report(results: list[dict]) -> str:
    return "\n".join(f"{r['case']}({r['param']}={r['value']}): {r['outcome']} {r['detail']}"
                     for r in failures(results))


if __name__ == "__main__":  # pragma: no cover
    child_main(sys.argv[1], sys.argv[2])
