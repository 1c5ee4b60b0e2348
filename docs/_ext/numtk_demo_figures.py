"""Sphinx extension: the tutorials' figures are drawn by the documentation build from the demos' code.

Usage in a page::

    .. numtk-demo-figure:: psro
       :alt: Population Exploitability against population size ...

       An optional caption.

The argument is a demonstration of numtk's registry of areas (``numtk._lib._registry``, the list behind
``python -m numtk demo NAME``). The directive finds the demo's module through the registry, draws its
figure with the small settings of :data:`FIGURES` and writes the PNG under the build's doctree directory
(outside the source tree; the HTML builder copies it into ``_images/``). It accepts the options of
``.. figure::``; a caption given in the page is followed by one sentence stating the settings. Nothing is
committed: a change to a demo's plotting code shows in the next build.

The settings are the smallest that still show what the tutorial describes, so that the build
(``sphinx-build -W -b html docs OUT``, run by CI) stays fast: a few seconds per figure. Drawing needs
matplotlib (in the ``docs`` extra).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

# docutils and sphinx are imported where the directive is made (in setup), so that the table of figures
# below can be read (by the tests) where only the test extras are installed
_logger = None


def _log(message: str) -> None:
    global _logger
    if _logger is None:
        from sphinx.util import logging

        _logger = logging.getLogger(__name__)
    _logger.info(message)


def _silent(*args: Any, **kwargs: Any) -> None:
    """The demos' ``out``: their printed tables are not wanted in the build log."""


def _psro(demo, path: str) -> None:
    # the demo itself, at its quick setting (the --plot of `python -m numtk demo psro`)
    demo.run(quick=True, out=_silent, plot=path)


def _stage(demo, path: str) -> None:
    # the panels of the demo's figure (stage and spectral seriation on the two synthetic curves, stage on two
    # krumsiek11 lineages), at n = 1000 points per curve instead of the demo's 2000, without the Recanati
    # baseline, which the figure does not show; drawn by the demo's plot_orders
    from numtk.datasets import load_krumsiek11
    from numtk.seriation import make_curve, order_agreement, spectral_seriation, stage

    n = 1000
    panels = []
    for name, (X, t) in (("helix, d=50, noise 0.05", make_curve("helix", n, 50, noise=0.05, rng=0)),
                         ("random_fourier, d=100, noise 0.02",
                          make_curve("random_fourier", n, 100, noise=0.02, rng=1))):
        for label, method in (("stage", stage), ("spectral_seriation", spectral_seriation)):
            order = method(X).order
            panels.append((f"{label}: {name}", t, order, order_agreement(order, t)))
    data = load_krumsiek11()
    for lineage in ("Mo", "Neu"):
        keep = data.fate == lineage
        order = stage(data.X[keep], n_neighbors=10).order
        panels.append((f"stage: krumsiek11 {lineage} lineage", data.step[keep], order,
                       order_agreement(order, data.step[keep])))
    demo.plot_orders(panels, path)


def _counterfactual(demo, path: str) -> None:
    # the demo's figure as it is (one synthetic_2d group; translation, diagonal and symmetric maps, K = 2);
    # the symmetric (psd) map is an SDP solved through cvxpy: without cvxpy the figure shows the two others
    from numtk._lib._optional import has_module

    families = (("translation", None), ("diagonal", 2.0))
    if has_module("cvxpy"):
        families += (("psd", 2.0),)
    else:
        _log("numtk-demo-figure counterfactual: cvxpy is not installed, the psd panel is left out")
    demo.plot_synthetic(path, families=families)


def _llep(demo, path: str) -> None:
    # the demo's figure as it is: the paper's benchmark configuration (128 experts on 8 devices, top-4, 32768
    # tokens per device, 4 hot experts) at 20 hot shares, simulated under the 'unit' and 'h200' cost models (the
    # plans and the simulator are fast: well under a second for the whole curve)
    import numpy as np

    shares = np.round(np.linspace(0.0, 0.95, 20), 3)
    demo.plot_speedups(demo.hot_share_table(shares), path)


def _puzzlemoe(demo, path: str) -> None:
    # the demo's figure at 11 thresholds instead of 21 and a 512 x 512 Gaussian pair instead of 1024 x 1024 (the
    # closed form is drawn as a line in any case); the digits MoE is trained as in the demo (about a second)
    import numpy as np

    demo.plot_threshold_sweep(demo.threshold_sweep(np.linspace(0.0, 1.0, 11), shape=(512, 512)), path)


def _camel(demo, path: str) -> None:
    # the planted world of the demo at its quick setting (20 mixtures x 5 proxy sizes, 8 starts per law): the laws'
    # predictions at the target size, and the optimal mixture against size, true and CAMEL's, at 17 sizes
    demo.plot_world(demo.planted_world(quick=True), path)


def _moddit(demo, path: str) -> None:
    # the demo at its quick setting (8 frames: a 64 x 64 block map, 24 steps), as the tour runs it
    demo.run(quick=True, out=_silent, plot=path)


def _tokendrop(demo, path: str) -> None:
    # the demo at its quick setting (three runs of 40 steps, batches of 16), as the tour runs it
    demo.run(quick=True, out=_silent, plot=path)


def _mswt(demo, path: str) -> None:
    # the demo at its quick setting (16 training trajectories, 100 steps of 16 pairs per model), as the tour runs it
    demo.run(quick=True, out=_silent, plot=path)


def _spectral(demo, path: str) -> None:
    # the demo at its quick setting (300 steps, one seed, plain, spectral and spectral REPA), as the tour runs it
    demo.run(quick=True, out=_silent, plot=path)


def _dyco(demo, path: str) -> None:
    # the demo at its quick setting (50 steps of batch 64 per pre-training, 60 episodes per SNR), as the tour runs it
    demo.run(quick=True, out=_silent, plot=path)


def _dipg(demo, path: str) -> None:
    # the demo at its quick setting (100 steps per prompt on 160 ego networks), as the tour runs it
    demo.run(quick=True, out=_silent, plot=path)


def _contrastive(demo, path: str) -> None:
    # the demo at the quick setting's 100 steps, but over the four default cap angles (the figure plots R2 against
    # the angle; the tour's quick run has two)
    demo.plot_r2(demo.demo(steps=100), path)


def _pisa(demo, path: str) -> None:
    # the demo at its quick setting (15 MRP steps, 48 + 48 sentence pairs, four noise levels), as the tour runs it
    demo.run(quick=True, out=_silent, plot=path)


def _ffr(demo, path: str) -> None:
    # the demo at its quick setting (vanilla GRPO and FFR, 250 steps, five seeds), as the tour runs it
    demo.run(quick=True, out=_silent, plot=path)


def _psro_rl(demo, path: str) -> None:
    # the demo at its quick setting (Kuhn, 8000 environment steps per RL oracle call, 7 members), as the tour runs it
    demo.run(quick=True, out=_silent, plot=path)


@dataclass(frozen=True)
class DemoFigure:
    """How the docs draw one demo's figure."""

    #: draw(demo module, png path)
    draw: Callable[[Any, str], None]
    #: the demo module's functions that ``draw`` calls (tests/test_docs_figures.py checks that they exist)
    uses: tuple[str, ...]
    #: the settings, stated under the figure
    settings: str


FIGURES: dict[str, DemoFigure] = {
    "psro": DemoFigure(_psro, ("run",),
                       "five PSRO variants (PSRO with the Nash and the uniform meta-solver, PSRO-rN, anytime PSRO, "
                       "Global PSRO) to 12 policies on Kuhn and on Leduc poker, as ``python -m numtk demo psro "
                       "--plot FILE`` draws them; ``--full`` goes to 30 policies on Leduc"),
    "stage": DemoFigure(_stage, ("plot_orders",),
                        "1000 points per synthetic curve (``python -m numtk demo stage`` uses 2000) and the Mo and "
                        "Neu lineages of krumsiek11"),
    "close-arms": DemoFigure(lambda demo, path: demo.run(quick=True, out=_silent, plot=path), ("run",),
                             "n = 3000 points in d = 20, arms 0.6 apart, gaps of 5, 7, 10 and 20 noise widths, "
                             "data seed 1, as ``python -m numtk demo close-arms --plot FILE`` draws it; ``--full`` "
                             "adds 3 and 15 noise widths; 1-D UMAP is run where umap-learn is installed, else its "
                             "values as recorded with umap-learn 0.5.12 are drawn dotted"),
    "counterfactual": DemoFigure(_counterfactual, ("plot_synthetic",),
                                 "one ``synthetic_2d`` group, as ``python -m numtk demo counterfactual --plot FILE`` "
                                 "draws it"),
    "llep": DemoFigure(_llep, ("hot_share_table", "plot_speedups"),
                       "LLEP against standard EP on the paper's benchmark configuration (128 experts on 8 devices, "
                       "top-4, 32768 tokens per device, 4 hot experts) at 20 hot shares from 0 to 0.95, simulated "
                       "under the ``'unit'`` and ``'h200'`` cost models, as ``python -m numtk demo llep --plot FILE`` "
                       "draws it"),
    "puzzlemoe": DemoFigure(_puzzlemoe, ("threshold_sweep", "plot_threshold_sweep"),
                            "PuzzleMoE at 11 similarity thresholds from 0 to 1, on a 512 x 512 pair of Gaussian "
                            "experts (standard deviation 0.02, no norms) and on the digits MoE's 8 experts merged in "
                            "4 pairs with the routed Wanda norms; ``python -m numtk demo puzzlemoe --plot FILE`` "
                            "draws 21 thresholds and a 1024 x 1024 pair"),
    "camel": DemoFigure(_camel, ("planted_world", "plot_world"),
                        "the planted world of ``planted_law(5, 5, rng=0)``, 20 Dirichlet mixtures at 5 proxy sizes "
                        "from 1.2e7 to 1.5e8 with log-normal noise 1e-3, each law fitted with 8 starts, as "
                        "``python -m numtk demo camel --plot FILE`` draws it; ``--full`` fits 40 mixtures with 32 "
                        "starts"),
    "moddit": DemoFigure(_moddit, ("run",),
                         "the quick setting of the demo (8 frames of 128 tokens in blocks of 16: a 64 x 64 block map, "
                         "24 steps, top_k 8), as ``python -m numtk demo moddit --plot FILE`` draws it; ``--full`` "
                         "runs 10 frames (an 80 x 80 map) and 42 steps"),
    "tokendrop": DemoFigure(_tokendrop, ("run",),
                            "the quick setting of the demo (backpropagation and TokenDrop at rho 0.5 and 0.25, 40 steps "
                            "of batches of 16), as ``python -m numtk demo tokendrop --plot FILE`` draws it; ``--full`` "
                            "trains 120 steps of batches of 32 and adds DropBP"),
    "mswt": DemoFigure(_mswt, ("run",),
                       "the quick setting of the demo (16 training and 4 held-out Kuramoto-Sivashinsky trajectories, "
                       "100 steps of 16 pairs per model), as ``python -m numtk demo mswt --plot FILE`` draws it; "
                       "``--full`` trains 200 steps of 32 pairs on 32 trajectories"),
    "spectral": DemoFigure(_spectral, ("run",),
                           "the quick setting of the demo (300 steps of batches of 256, one seed; the plain loss, the "
                           "spectral regulariser and spectral REPA), as ``python -m numtk demo spectral --plot FILE`` "
                           "draws it; ``--full`` trains 800 steps over three seeds and adds REPA"),
    "dyco": DemoFigure(_dyco, ("run",),
                       "the quick setting of the demo (SimCLR and DyCo-CL pre-training of 50 steps of batch 64 on "
                       "2200 generated windows, 60 1-shot episodes per SNR), as ``python -m numtk demo dyco --plot "
                       "FILE`` draws it; ``--full`` trains 200 steps of batch 128 and draws 200 episodes"),
    "dipg": DemoFigure(_dipg, ("run",),
                       "the quick setting of the demo (DiP-G and the continuous prompt trained 100 steps on 80 of 160 "
                       "planted ego networks, tested on the other 80), as ``python -m numtk demo dipg --plot FILE`` "
                       "draws it; ``--full`` trains 200 steps on 240 ego networks"),
    "contrastive": DemoFigure(_contrastive, ("demo", "plot_r2"),
                              "linear encoders trained 100 steps of batches of 256 per run at the cap angles 180, 57, "
                              "29 and 17 degrees (four runs each), as ``python -m numtk demo contrastive --full --plot "
                              "FILE`` draws them at 300 steps"),
    "pisa": DemoFigure(_pisa, ("run",),
                       "the quick setting of the demo (MiniLM split after block 2, or a random tiny BERT without its "
                       "wheel; 15 MRP steps, 48 + 48 sentence pairs), as ``python -m numtk demo pisa --plot FILE`` "
                       "draws it; ``--full`` runs 60 MRP steps on 160 + 160 pairs"),
    "privcode": DemoFigure(lambda demo, path: demo.run(quick=True, out=_silent, plot=path), ("run",),
                           "the quick setting of the demo (100 steps of each run, epsilon 4), as ``python -m numtk "
                           "demo privcode --plot FILE`` draws it; ``--full`` trains 800 steps"),
    "knowbias": DemoFigure(lambda demo, path: demo.plot_demo(demo.demo(smollm2=False), path), ("demo", "plot_demo"),
                           "the planted-neuron toy alone (8 random prompts, m = 20 steps); ``python -m numtk demo "
                           "knowbias --plot FILE`` adds SmolLM2's P(\"No\") and P(\"Yes\") when its wheel is installed"),
    "ffr": DemoFigure(_ffr, ("run",),
                      "the quick setting of the demo (vanilla GRPO and FFR on the bandit toy, 250 steps, five seeds), "
                      "as ``python -m numtk demo ffr --plot FILE`` draws it; ``--full`` trains 500 steps and adds the "
                      "anchor's original-completion scoring"),
    "hirsch": DemoFigure(lambda demo, path: demo.run(quick=True, out=_silent, plot=path), ("run",),
                         "the quick setting of the demo (the options agent, flat RL and greedy search, 4000 environment "
                         "steps each on n = 7, d = 3, linearity over Q), as ``python -m numtk demo hirsch --plot FILE`` "
                         "draws it; ``--full`` runs 16000 steps each"),
    "psro-rl": DemoFigure(_psro_rl, ("run",),
                          "the quick setting of the demo (Kuhn poker, 7 members, 8000 environment steps per RL oracle "
                          "call; a PE of 0 is drawn at 1e-3), as ``python -m numtk demo psro-rl --plot FILE`` draws it; "
                          "``--full`` runs 20000 steps a call to 9 members"),
}


def demo_module(name: str):
    """The module of demonstration ``name``, found through numtk's registry of areas."""
    from numtk._lib._registry import demos

    registered = demos()
    if name not in registered:
        raise KeyError(f"{name!r} is not a demonstration of numtk's registry ({', '.join(sorted(registered))})")
    return importlib.import_module(registered[name].entry.partition(":")[0])


def draw(name: str, path: str | os.PathLike) -> Path:
    """Draw demo ``name``'s figure into ``path`` (a PNG) with the settings of :data:`FIGURES`."""
    import matplotlib

    matplotlib.use("Agg")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    FIGURES[name].draw(demo_module(name), str(path))
    return path


def _directive_class():
    """The class of ``.. numtk-demo-figure::`` (made here, where docutils is imported)."""
    from docutils import nodes
    from docutils.parsers.rst.directives.images import Figure

    class DemoFigureDirective(Figure):
        """``.. numtk-demo-figure:: NAME``: a ``figure`` whose image is drawn now from demo NAME's code."""

        required_arguments = 1
        optional_arguments = 0
        final_argument_whitespace = False
        option_spec = dict(Figure.option_spec)
        has_content = True

        def run(self) -> list[nodes.Node]:
            name = self.arguments[0]
            if name not in FIGURES:
                raise self.error(f"numtk-demo-figure: no figure for {name!r}; known: {', '.join(sorted(FIGURES))}")
            env = self.state.document.settings.env
            out = Path(env.doctreedir) / "numtk-demo-figures" / f"{name}.png"
            try:
                draw(name, out)
            except Exception as exc:  # reported at the directive, which fails a -W build
                raise self.error(f"numtk-demo-figure {name}: drawing failed: {type(exc).__name__}: {exc}") from exc
            here = Path(env.srcdir) / Path(env.docname).parent
            self.arguments = [Path(os.path.relpath(out, here)).as_posix()]
            note = f"Drawn by the documentation build from the demo's code: {FIGURES[name].settings}."
            if self.content:
                self.content.append("", "numtk-demo-figure", 0)
            self.content.append(note, "numtk-demo-figure", 0)
            return super().run()

    return DemoFigureDirective


def setup(app) -> dict[str, Any]:
    app.add_directive("numtk-demo-figure", _directive_class())
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
