"""The README's first command on a clean machine: numtk and its required dependencies alone.

A new virtual environment gets exactly the distributions numtk requires (its metadata's
``Requires-Dist`` without extras) and a copy of the numtk that is installed here; the tour then runs
from the checkout's root, as the README tells a new user to run it, and must finish cleanly.
"""

import importlib.metadata
import os
import re
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _required(dist) -> list[str]:
    """The Requires-Dist entries whose marker does not name an extra."""
    return [r for r in (dist.requires or []) if "extra" not in r.partition(";")[2]]


def _copy_installed(dist, site: Path) -> int:
    """Copy every file of the installed distribution (its RECORD) under ``site``; returns the count."""
    n = 0
    for f in dist.files or []:
        src = Path(f.locate())
        if not src.is_file() or "__pycache__" in f.parts:
            continue
        dst = site / f
        if ".." in f.parts:  # scripts live outside site-packages; the tour needs none of them
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        n += 1
    return n


def test_required_dependencies_are_exactly_declared():
    dist = importlib.metadata.distribution("numtk")
    names = sorted(re.split(r"[<>=!~; \[]", r, maxsplit=1)[0].lower() for r in _required(dist))
    assert names == ["numpy", "scikit-learn", "scipy"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_tour_runs_on_the_required_dependencies_alone(tmp_path):
    dist = importlib.metadata.distribution("numtk")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "NUMTK_", "PIP_REQUIRE"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", *_required(dist)],
                   check=True, env=env, timeout=600)
    site = Path(subprocess.check_output([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True, env=env).strip())
    assert _copy_installed(dist, site) > 0
    listed = subprocess.check_output([py, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
                                     text=True, env=env)
    present = {line.split("==")[0].lower() for line in listed.split()}
    assert not present & {"cvxpy", "matplotlib", "tqdm", "torch", "pot", "hypothesis", "pytest"}, present

    cwd = ROOT if (ROOT / "pyproject.toml").is_file() else tmp_path
    tour = subprocess.run([py, "-m", "numtk", "tour"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=800)
    out = tour.stdout + tour.stderr
    assert tour.returncode == 0, out[-4000:]
    assert "Traceback" not in out and "Warning" not in out, out[-4000:]
    assert "to be confirmed" not in out
    table = out[out.rindex("area "):]
    for area in ("stats", "seriation", "counterfactual", "games", "sampling"):
        assert re.search(rf"^{area}\s", table, re.M), f"no {area} row in the tour's table"
    assert 'pip install "numtk[cvxpy]"' in out  # the rows that need cvxpy say how to get them
    assert 'pip install "numtk[torch]"' in out  # and the bridge's demonstrations, which need torch
