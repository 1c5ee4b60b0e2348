"""The sampler demonstration (table rows and figure) on a shortened case list."""

import re

import pytest

from numtk.sampling import SinhTransform, _demo


def test_demo_rows_and_figure(tmp_path, monkeypatch):
    image = pytest.importorskip("matplotlib.image")  # a test extra: installed in CI
    # the Gaussian row is fitted through a transform, as the demo's warped funnel is
    warp = SinhTransform(2.0, dims=slice(1, None))
    monkeypatch.setattr(_demo, "_CASES", [("mixture 1-D", "mixture1d", dict(n_steps=20, degree=15, refine=0)),
                                          ("gaussian d=4", "gauss4", dict(n_steps=10, degree=7, refine=0,
                                                                          warp=warp))])
    lines = []
    path = tmp_path / "sampler.png"
    rows = _demo.run(quick=True, out=lines.append, plot=str(path))
    assert [r["area"] for r in rows] == ["sampling", "sampling"]
    for row in rows:
        dlz, se = map(float, re.match(r"dlogZ=([-+0-9.]+)\+-([0-9.]+)", row["result"]).groups())
        assert abs(dlz) < 4 * se + 0.02  # the importance-weighted estimate is unbiased in Z
    assert any(line.startswith("mixture 1-D") for line in lines)
    pixels = image.imread(str(path))
    assert pixels.std() > 0  # one 1-D panel (the 4-D Gaussian is not drawn)
