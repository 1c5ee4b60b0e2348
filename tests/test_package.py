"""Package-level contracts: public API index, import hygiene, command line, native headers."""

import importlib
import inspect
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import numtk

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("area", numtk.submodules)
def test_every_public_name_resolves_and_is_indexed(area):
    _check_indexed(importlib.import_module(f"numtk.{area}"), f"numtk.{area}")


def _check_indexed(mod, where):
    assert mod.__all__, where
    for name in mod.__all__:
        assert hasattr(mod, name), f"{where}.{name} is in __all__ but missing"
        # the module docstring is the API index (autosummary): every public name is listed
        assert re.search(rf"^\s+{name}\b", mod.__doc__, re.M), f"{name} missing from the docstring index"
        obj = getattr(mod, name)
        if inspect.ismodule(obj):  # the torch bridge lists its modules, each with its own index
            _check_indexed(obj, f"{where}.{name}")
            continue
        if callable(obj) and not isinstance(obj, type):
            doc = obj.__doc__ or ""
            sections = ("Parameters", "Returns", "Examples") if inspect.signature(obj).parameters else (
                "Returns", "Examples")
            for section in sections:
                assert section in doc, f"{where}.{name} docstring lacks {section}"


def _fresh(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_import_numtk_is_light():
    # `import numtk` must not pull in optional or heavy modules; areas load on first access.
    out = _fresh("import sys, numtk; print(sorted(m for m in sys.modules if m.split('.')[0] in "
                 "{'torch','cvxpy','numba','sklearn','tqdm','dask','scipy','numtk'}))")
    loaded = eval(out)
    assert not [m for m in loaded if m.split(".")[0] in {"torch", "cvxpy", "numba", "sklearn", "tqdm", "dask"}]
    assert "numtk.stats" not in loaded and not any(m.startswith("scipy") for m in loaded)
    out = _fresh("import sys, numtk.stats; print(sorted(m for m in sys.modules if m.startswith('scipy.stats') "
                 "or m.split('.')[0] in {'torch','cvxpy','numba','sklearn'}))")
    assert eval(out) == []


@pytest.mark.parametrize("area", numtk.submodules)
def test_each_area_imports_in_a_fresh_interpreter(area):
    _fresh(f"import numtk.{area}")


def test_lazy_attribute_access():
    assert numtk.stats.kendall_tau is importlib.import_module("numtk.stats").kendall_tau
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        numtk.nope
    assert set(numtk.submodules) <= set(dir(numtk))


def test_cli_info_and_demo():
    info = subprocess.run([sys.executable, "-m", "numtk", "info"], capture_output=True, text=True, check=True)
    assert f"numtk {numtk.__version__}" in info.stdout
    assert "numtk.stats._stats_ext" in info.stdout and "MISSING" not in info.stdout
    demo = subprocess.run([sys.executable, "-m", "numtk", "demo", "kendall"], capture_output=True, text=True,
                          check=True)
    assert "rel.diff 0.0e+00 (SciPy)" in demo.stdout  # identical to SciPy on both datasets
    assert demo.stdout.count("kendall_tau") >= 2
    bad = subprocess.run([sys.executable, "-m", "numtk", "demo", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_native_headers_do_not_include_python():
    headers = list((ROOT / "native").rglob("*.hpp"))
    assert headers
    include = re.compile(r'^\s*#\s*include\s*[<"](Python\.h|pybind11/|numpy/)', re.M)
    for header in headers:
        assert not include.search(header.read_text()), header


def _area_modules():
    """(area, path, tree) of every module of numtk's areas (numtk/_lib and the package root aside)."""
    import ast

    for path in sorted((ROOT / "src" / "numtk").rglob("*.py")):
        rel = path.relative_to(ROOT / "src" / "numtk").parts
        if len(rel) < 2 or rel[0].startswith("_"):
            continue
        yield rel[0], path, ast.parse(path.read_text(encoding="utf-8"))


def test_areas_import_only_public_names_of_each_other():
    # Areas share code through numtk._lib or another area's public API, never its private modules.
    import ast

    bad = []
    for area, path, tree in _area_modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("numtk."):
                mods, names = [node.module], [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                mods, names = [a.name for a in node.names if a.name.startswith("numtk.")], []
            else:
                continue
            for mod in mods:
                parts = mod.split(".")
                if parts[1] in (area, "_lib"):
                    continue
                if any(p.startswith("_") for p in parts[2:]) or any(n.startswith("_") for n in names):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {mod} {names}")
    # nor do they read another area's files (importlib.resources.files("numtk.<other>")): a loader does
    for area, path, tree in _area_modules():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "files" and node.args
                    and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("numtk.")
                    and str(node.args[0].value).split(".")[1] != area):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: reads the files of {node.args[0].value}")
    assert not bad, "private imports across areas:\n" + "\n".join(bad)


def test_areas_read_no_private_attribute_of_another_area():
    # A private attribute (self._x, or a method _x) defined by one area's classes and read as
    # `obj._x` in another area that defines no such name itself.
    import ast

    defined: dict[str, set[str]] = {}
    reads = []
    for area, path, tree in _area_modules():
        names = defined.setdefault(area, set())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("_"):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                    if isinstance(node.ctx, ast.Store):
                        names.add(node.attr)
                    continue
                if isinstance(owner, ast.Name) and owner.id.startswith("_"):
                    continue  # a private module of the area itself (_games_ext.rm_plus, _basis.evaluate)
                reads.append((area, node.attr, f"{path.relative_to(ROOT)}:{node.lineno}"))
    bad = [where + f": .{attr}" for area, attr, where in reads
           if attr not in defined[area] and any(attr in names for a, names in defined.items() if a != area)]
    assert not bad, "private attributes of another area's objects:\n" + "\n".join(bad)


def test_no_import_cycles_between_modules():
    # every import counts, the ones inside functions too (a lazy import is how a cycle hides)
    import ast

    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "src" / "numtk").rglob("*.py")):
        mod = ".".join(path.relative_to(ROOT / "src").with_suffix("").parts).removesuffix(".__init__")
        deps = graph.setdefault(mod, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("numtk"):
                deps.add(node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("numtk"))
    # a package's __init__ re-exports its modules: the cycles that matter are between the modules
    graph = {m: {d for d in ds if d in graph} for m, ds in graph.items() if m.count(".") >= 2}
    cycles = []
    state: dict[str, int] = {}

    def visit(m, stack):
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if d not in graph:
                continue
            if state.get(d) == 1:
                cycles.append(" -> ".join(stack[stack.index(d):] + [d]))
            elif d not in state:
                visit(d, stack + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_package_does_not_import_its_command_line():
    out = _fresh("import sys, numtk; numtk.show_config(); print('numtk.__main__' in sys.modules)")
    assert "compiled modules:" in out and out.strip().endswith("False")


def test_the_package_docstring_lists_every_area():
    for area in numtk.submodules:
        assert re.search(rf"``numtk\.{area}``\s+\S", numtk.__doc__), f"numtk.{area} missing from numtk's docstring"


def test_an_unbuilt_source_tree_gives_a_clear_error(tmp_path):
    # The sources live in src/numtk so that `python -m numtk` run from the clone's root imports the
    # installed copy; importing the unbuilt tree itself must say how to build it, not fail obscurely.
    shutil.copytree(ROOT / "src" / "numtk", tmp_path / "numtk",
                    ignore=shutil.ignore_patterns("*.so", "_version.py", "__pycache__"))
    # -S: no site hooks (an editable install's import finder would otherwise answer first).
    proc = subprocess.run([sys.executable, "-S", "-c", "import numtk"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr and "is not built" in proc.stderr
    assert "pip install" in proc.stderr


def test_the_clone_root_holds_no_package_folder():
    # `python -m numtk tour` from the root (the README's first command) must not find sources there.
    assert not (ROOT / "numtk").exists() or not (ROOT / "pyproject.toml").is_file()
