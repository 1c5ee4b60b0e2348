"""The registry of numtk's areas: one entry per area, read by the command line, ``info`` and ``bench/``.

Each :class:`Area` lists

- its demonstrations (:class:`Demo`): the name ``python -m numtk demo NAME`` takes and the entry point
  that runs it, ``"module:function"`` with the signature ``run(*, quick=True, out=print[, plot=None])``
  returning the rows of the tour's table (``plot``, when the demo has it, is the file its figure is saved
  to); one demo per module: the area's ``_demo.py``, and ``_demo_<topic>.py`` for each further one;
- its compiled extension modules, which ``python -m numtk info`` (:func:`numtk.show_config`) loads and
  reports;
- its sections of ``bench/compare.py`` (:class:`CompareSection`): the command-line flag, its help and the
  function of ``bench/benchmarks/`` that runs the comparison.

A new area adds itself here, in one place (and, as before, to ``submodules`` in ``numtk/__init__.py`` and
to the meson build). ``tests/test_registry.py`` checks the registry against reality: every extension
module the build installs is listed and imports, every demo runs, ``bench/compare.py``'s flags are the
registry's.

The entries are strings, resolved on use (:func:`load`), so reading the registry imports nothing.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["AREAS", "Area", "CompareSection", "Demo", "area", "compare_sections", "compiled_modules", "demos",
           "load"]


@dataclass(frozen=True)
class Demo:
    """A demonstration: ``python -m numtk demo <name>``, also run by ``python -m numtk tour``."""

    #: the name on the command line
    name: str
    #: ``"module:function"``: ``run(*, quick=True, out=print[, plot=None]) -> list[dict]``
    entry: str
    #: optional packages the demonstration imports (``("torch",)`` for the bridge's); where one is missing
    #: the tour prints a row that says how to install it instead of running the demonstration
    requires: tuple[str, ...] = ()

    def missing(self) -> tuple[str, ...]:
        """The packages of ``requires`` that cannot be imported here (looked up without importing them)."""
        from numtk._lib._optional import has_module

        return tuple(p for p in self.requires if not has_module(p))


@dataclass(frozen=True)
class CompareSection:
    """A section of ``bench/compare.py``, switched on by the flag ``--<flag>``.

    ``takes`` says what the flag carries: ``"switch"`` (no value), ``"sizes"`` (comma-separated
    problem sizes, ``1e4`` notation accepted) or ``"choices"`` (comma-separated names from ``choices``, or
    ``none``; ``default`` applies when the flag is not given; the entry point's module lists the same
    names as ``CHOICES``). ``bench/compare.py`` calls the entry point
    (``"module:function"``, imported with ``bench/`` on the path) with the flag's value as the first
    argument when the flag takes one, and with the keywords it accepts among ``quick`` (bool: fewer sizes
    and repetitions) and ``options`` (the parsed command line, for the shared ``--sizes``, ``--data``,
    ``--repeat``, ``--min-time`` and ``--max-single``).
    """

    flag: str
    entry: str
    help: str
    takes: str = "switch"
    choices: tuple[str, ...] = ()
    default: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.takes not in ("switch", "sizes", "choices"):
            raise ValueError(f"`takes` must be 'switch', 'sizes' or 'choices', not {self.takes!r}")


@dataclass(frozen=True)
class Area:
    """One area of numtk (``numtk.<name>``)."""

    name: str
    #: the area's compiled extension modules, by full name
    compiled: tuple[str, ...] = ()
    demos: tuple[Demo, ...] = ()
    #: its sections of ``bench/compare.py``
    compare: tuple[CompareSection, ...] = ()


AREAS: tuple[Area, ...] = (
    Area(
        "stats",
        compiled=("numtk.stats._stats_ext", "numtk.stats._kendall_pointwise"),
        demos=(Demo("kendall", "numtk.stats._demo:run"),),
        compare=(CompareSection(
            "kernels", "benchmarks._stats:compare", takes="choices", choices=("kendall_tau", "kendall_tau_c"),
            default=("kendall_tau",),
            help="the Kendall kernels against SciPy at --sizes on --data (kendall_tau is tau-b)"),
            CompareSection(
                "threads", "benchmarks._threads:report", takes="switch",
                help="the thread crossovers of the compiled kernels: workers=1, -1 and 2 (grain ignored) "
                     "per kernel and size, against each kernel's grain"),),
    ),
    Area(
        "seriation",
        compiled=("numtk.seriation._seriation_ext",),
        demos=(Demo("stage", "numtk.seriation._demo:run"), Demo("close-arms", "numtk.seriation._demo_arms:run")),
        compare=(
            CompareSection("seriation", "benchmarks._seriation:compare", takes="sizes",
                           help="numtk.seriation (stage, spectral, recanati) at these sizes, e.g. 1e3,1e4"),
            CompareSection("seriation-hard", "benchmarks._seriation:compare_hard", takes="sizes",
                           help="numtk.seriation on the hard curves (close spiral, noisy helix, uneven density)"),
            CompareSection("seriation-scaling", "benchmarks._seriation:compare_scaling",
                           help="numtk.seriation.stage against n (1e4 to 1e6; --quick: to 1e5) with its fitted "
                                "exponent, beside spectral seriation and UMAP"),
        ),
    ),
    Area(
        "counterfactual",
        compiled=("numtk.counterfactual._counterfactual_ext",),
        demos=(Demo("counterfactual", "numtk.counterfactual._demo:run"),),
        compare=(CompareSection(
            "counterfactual", "benchmarks._counterfactual:compare_section",
            help="numtk.counterfactual group maps against cvxpy (Clarabel/OSQP/SCS) and DAQP"),),
    ),
    Area(
        "games",
        compiled=("numtk.games._games_ext",),
        demos=(Demo("psro", "numtk.games._demo:run"),),
        compare=(CompareSection(
            "games", "benchmarks._games:compare",
            help="numtk.games against OpenSpiel and HiGHS (NashConv, PE, CFR+, RM+, PSRO)"),),
    ),
    Area(
        "ftt",
        compiled=("numtk.ftt._ftt_ext",),
        compare=(CompareSection(
            "ftt", "benchmarks._ftt:compare",
            help="numtk.ftt (FunctionalTT evaluation against a NumPy einsum reference, one ALS sweep, "
                 "tt_cross against teneva)"),),
    ),
    Area(
        "sampling",
        compiled=("numtk.sampling._sampling_ext",),
        demos=(Demo("sampler", "numtk.sampling._demo:run"),),
        compare=(
            CompareSection("sampling", "benchmarks._sampling:compare",
                           help="numtk.sampling (ScoreBasedSampler.fit with |dlog Z| and ESS; sinkhorn vs POT, "
                                "mmd vs NumPy)"),
            CompareSection("sampling-hard", "benchmarks._sampling:compare_hard",
                           help="the sampler on the benchmark targets of the literature (many-well d=32, "
                                "funnel d=10, double-well d=50, GMM-40): minutes each"),
        ),
    ),
    Area("datasets"),
    Area(
        "moe",
        compiled=("numtk.moe._moe_ext",),
        demos=(Demo("llep", "numtk.moe._demo:run"), Demo("puzzlemoe", "numtk.moe._demo_puzzle:run")),
        compare=(CompareSection(
            "moe", "benchmarks._moe:compare",
            help="numtk.moe: the LLEP planner against its pure-Python transcription, the MILP, EPLB, the "
                 "simulated benchmark configuration, LLEP under torch.distributed"),),
    ),
    Area(
        "mixture",
        demos=(Demo("camel", "numtk.mixture._demo:run"),),
        compare=(CompareSection(
            "mixture", "benchmarks._mixture:compare",
            help="numtk.mixture: law fits, predictions, the optimal mixture and the budget allocation against "
                 "plain SciPy fits and the spec's time targets"),),
    ),
    Area(
        "algebra",
        compiled=("numtk.algebra._algebra_ext",),
        compare=(CompareSection(
            "algebra", "benchmarks._algebra:compare",
            help="numtk.algebra: the Reisner linearity check (n = 8), linear quotients (m <= 50), generator-graph "
                 "diameters against networkx"),),
    ),
    Area(  # the PyTorch bridge: Python only, its modules import torch on first access
        "torch",
        demos=(Demo("tokendrop", "numtk.torch._demo_tokendrop:run", requires=("torch",)),
               Demo("moddit", "numtk.torch._demo_moddit:run", requires=("torch",)),
               Demo("mswt", "numtk.torch._demo_mswt:run", requires=("torch",)),
               Demo("spectral", "numtk.torch._demo_spectral:run", requires=("torch",)),
               Demo("contrastive", "numtk.torch._demo_contrastive:run", requires=("torch",)),
               Demo("dipg", "numtk.torch._demo_dipg:run", requires=("torch",)),
               Demo("dyco", "numtk.torch._demo_dyco:run", requires=("torch",)),
               Demo("knowbias", "numtk.torch._demo_knowbias:run", requires=("torch",)),
               Demo("ffr", "numtk.torch._demo_ffr:run", requires=("torch",)),
               Demo("privcode", "numtk.torch._demo_privcode:run", requires=("torch",)),
               Demo("pisa", "numtk.torch._demo_pisa:run", requires=("torch", "transformers")),
               Demo("hirsch", "numtk.torch._demo_hirsch:run", requires=("torch", "gymnasium")),
               Demo("psro-rl", "numtk.torch._demo_psro_oracle:run", requires=("torch",))),
        compare=(
            CompareSection("tokendrop", "benchmarks._torch_tokendrop:compare",
                           help="numtk.torch.tokendrop: saved-activation bytes and step time for rho in "
                                "{0.25, 0.5, 1} against plain backprop and layer-level skipping"),
            CompareSection("moddit", "benchmarks._torch_moddit:compare",
                           help="numtk.torch.moddit: block-sparse attention against dense "
                                "scaled_dot_product_attention (sequence 16384, block 128) and its crossover"),
            CompareSection("mswt", "benchmarks._torch_mswt:compare",
                           help="numtk.torch.mswt: DWT/IDWT in torch against PyWavelets, forward and backward"),
            CompareSection("spectral", "benchmarks._torch_spectral:compare",
                           help="numtk.torch.spectral: the alignment losses' cost beside the denoising loss"),
            CompareSection("contrastive", "benchmarks._torch_contrastive:compare",
                           help="numtk.torch.contrastive: the vMF sampler against scipy.stats.vonmises_fisher "
                                "(samples per second, moments) at d = 3, 10, 128"),
            CompareSection("dipg", "benchmarks._torch_dipg:compare",
                           help="numtk.torch.dipg: the screened top-k against the full top-k by active-set "
                                "fraction"),
            CompareSection("dyco", "benchmarks._torch_dyco:compare",
                           help="numtk.datasets.rml2016_like windows per second on one core; DyCo-CL's training "
                                "step beside plain SimCLR"),
            CompareSection("knowbias", "benchmarks._torch_knowbias:compare",
                           help="numtk.torch.knowbias: batched integrated gradients of one layer against a loop "
                                "over the interpolation steps"),
            CompareSection("ffr", "benchmarks._torch_ffr:compare",
                           help="numtk.torch.ffr: the GRPO token loss and one GRPO step beside a plain "
                                "cross-entropy step"),
            CompareSection("privcode", "benchmarks._torch_privcode:compare",
                           help="numtk.torch.privcode: a DP-SGD step against Opacus's and a non-private step; "
                                "the RDP accountant's time"),
            CompareSection("pisa", "benchmarks._torch_pisa:compare",
                           help="numtk.torch.pisa: clipping and noise at the split, the analytic Gaussian "
                                "calibration's time"),
            CompareSection("hirsch", "benchmarks._torch_hirsch:compare",
                           help="numtk.torch.hirsch: environment steps per second, the policy's forward, the "
                                "options agent's episode"),
            CompareSection("psro-rl", "benchmarks._torch_psro_oracle:compare",
                           help="numtk.torch.psro_oracle: rollout environment steps per second against OpenSpiel's "
                                "Python RL environment on the same game; one oracle call"),
        ),
    ),
)


def area(name: str) -> Area:
    """The registry entry of ``numtk.<name>``."""
    for a in AREAS:
        if a.name == name:
            return a
    raise KeyError(f"no area {name!r} in the registry")


def demos() -> dict[str, Demo]:
    """Every demonstration by name, in the registry's order."""
    return {d.name: d for a in AREAS for d in a.demos}


def compiled_modules() -> tuple[str, ...]:
    """The full names of every compiled extension module, in the registry's order."""
    return tuple(m for a in AREAS for m in a.compiled)


def compare_sections() -> tuple[CompareSection, ...]:
    """Every section of ``bench/compare.py``, in the registry's order (the order they run in)."""
    return tuple(s for a in AREAS for s in a.compare)


def load(entry: str) -> Callable[..., Any]:
    """The object an entry point ``"module:function"`` names (imports the module)."""
    module, _, name = entry.partition(":")
    if not module or not name:
        raise ValueError(f"an entry point is 'module:function', not {entry!r}")
    return getattr(importlib.import_module(module), name)
