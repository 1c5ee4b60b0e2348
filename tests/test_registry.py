"""The registry of areas (numtk._lib._registry) matches reality.

It is the one list behind the command line's demos, ``python -m numtk info``'s compiled modules and
``bench/compare.py``'s flags; these tests compare it with what the build installs, with the demo modules
in the tree and with compare.py's parser.
"""

import importlib
import importlib.machinery
import importlib.util
import inspect
import re
import sys
from pathlib import Path

import pytest

import numtk
from numtk import __main__ as cli
from numtk._lib import _registry
from numtk._lib._config import info_text

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "numtk"
BENCH = ROOT / "bench"


def _built_extensions() -> set[str]:
    """Full names of the extension modules the build makes: from the meson files of the tree and, for an
    installed (not editable) numtk, from the files installed beside the package."""
    names = set()
    for build in SRC.rglob("meson.build"):
        for mod in re.findall(r"py\.extension_module\(\s*'([^']+)'", build.read_text(encoding="utf-8")):
            package = ".".join(("numtk",) + build.parent.relative_to(SRC).parts)
            names.add(f"{package}.{mod}")
    # EXTENSION_SUFFIXES runs from the most specific ('.cpython-311-x86_64-linux-gnu.so') to the plainest
    # ('.so'): a file's module name is its name less the first suffix it ends with
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    for root in map(Path, numtk.__path__):
        for path in root.rglob("*"):
            suffix = next((s for s in suffixes if path.name.endswith(s)), None)
            if suffix is not None and path.is_file():
                rel = path.relative_to(root).parts
                names.add(".".join(("numtk",) + rel[:-1] + (path.name[: -len(suffix)],)))
    return names


def test_the_registry_lists_every_area():
    assert [a.name for a in _registry.AREAS] == numtk.submodules
    assert len({a.name for a in _registry.AREAS}) == len(_registry.AREAS)


def test_every_built_extension_module_is_listed_and_imports():
    built = _built_extensions()
    assert built, "no extension module found in the meson files"
    listed = _registry.compiled_modules()
    assert len(set(listed)) == len(listed)
    assert built <= set(listed), f"built but not in the registry: {sorted(built - set(listed))}"
    assert set(listed) <= built, f"in the registry but not built: {sorted(set(listed) - built)}"
    for name in listed:
        area = _registry.area(name.split(".")[1])
        assert name in area.compiled  # listed under its own area
        importlib.import_module(name)
    # info (and numtk.show_config) reports exactly these, every one loaded
    text = info_text()
    reported = re.findall(r"^  (numtk\.\S+)\s+(\S+)", text, re.M)
    assert [name for name, _ in reported] == list(listed)
    assert all(status == "ok" for _, status in reported), text


def test_every_demo_module_of_the_tree_is_registered():
    # an area's demonstration lives in _demo.py; a second one in _demo_<topic>.py. Each module holds exactly one
    # registered demo, under its own area, and the registry names no other module.
    entries = [demo.entry.partition(":")[0] for demo in _registry.demos().values()]
    assert len(entries) == len(set(entries)), f"a demo module registered twice: {entries}"
    paths = sorted(SRC.glob("*/_demo.py")) + sorted(SRC.glob("*/_demo_*.py"))
    in_tree = [f"numtk.{p.parent.name}.{p.stem}" for p in paths]
    assert set(in_tree) == set(entries)
    for a in _registry.AREAS:
        for demo in a.demos:
            assert re.fullmatch(rf"numtk\.{a.name}\._demo(_\w+)?:\w+", demo.entry), \
                f"{demo.name}: {demo.entry} is not a demo module of its area {a.name}"


@pytest.mark.parametrize("name", sorted(_registry.demos()))
def test_every_demo_resolves_and_takes_the_command_line_arguments(name, capsys):
    demo = _registry.demos()[name]
    assert cli.DEMOS[name] == demo.entry
    run = _registry.load(demo.entry)
    assert callable(run)
    params = inspect.signature(run).parameters
    assert {"quick", "out"} <= set(params), f"{demo.entry} must take quick= and out="
    assert all(params[p].kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    with pytest.raises(SystemExit) as exc:
        cli.main(["demo", name, "--help"])
    assert exc.value.code == 0
    assert "--plot" in capsys.readouterr().out


def test_the_command_line_offers_exactly_the_registry_demos(capsys):
    assert list(cli.DEMOS) == list(_registry.demos())
    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    help_text = capsys.readouterr().out
    assert "{" + ",".join(sorted(_registry.demos())) + "}" in help_text


def test_a_demo_whose_package_is_missing_is_skipped_by_the_tour_with_the_install_hint(monkeypatch, capsys):
    # the bridge's demonstrations need torch; on the required dependencies alone the tour says how to get it
    # and goes on, and `demo NAME` fails with the same hint (exit status 1, no traceback)
    fake = _registry.Demo("kendall", "numtk.stats._demo:run", requires=("numtk_no_such_package",))
    assert fake.missing() == ("numtk_no_such_package",)
    assert _registry.Demo("x", "m:f", requires=("numpy",)).missing() == ()
    monkeypatch.setattr(_registry, "demos", lambda: {"kendall": fake})
    monkeypatch.setattr(cli, "DEMOS", {"kendall": fake.entry})
    monkeypatch.setattr(cli, "_load", lambda name: pytest.fail("a demo with a missing package was imported"))
    assert cli.main(["tour"]) == 0
    out = capsys.readouterr().out
    assert "skipped: demo 'kendall' needs numtk_no_such_package" in out
    assert re.search(r"^stats\s+kendall\s+skipped", out, re.M), out
    assert cli.main(["demo", "kendall"]) == 1
    assert "needs numtk_no_such_package" in capsys.readouterr().err


def test_every_demo_that_needs_torch_says_so():
    for name, demo in _registry.demos().items():
        if demo.entry.startswith("numtk.torch."):
            assert "torch" in demo.requires, name


def test_load_refuses_a_malformed_entry():
    with pytest.raises(ValueError, match="module:function"):
        _registry.load("numtk.stats._demo")
    with pytest.raises(AttributeError):
        _registry.load("numtk.stats._demo:nope")


@pytest.fixture(scope="module")
def compare_module():
    if not (BENCH / "compare.py").is_file():
        pytest.skip("bench/ is not in this checkout")
    pytest.importorskip("numtk.stats")
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("numtk_bench_compare", BENCH / "compare.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.path[:] = [p for p in sys.path if p != str(BENCH)]
        for name in [m for m in sys.modules if m == "benchmarks" or m.startswith("benchmarks.")]:
            del sys.modules[name]


def test_compare_flags_are_the_registry_sections(compare_module):
    parser = compare_module.build_parser()
    shared = {"--help", "--sizes", "--data", "--repeat", "--min-time", "--max-single", "--quick"}
    flags = {opt for action in parser._actions for opt in action.option_strings if opt.startswith("--")}
    sections = _registry.compare_sections()
    assert flags - shared == {f"--{s.flag}" for s in sections}
    assert len({s.flag for s in sections}) == len(sections)
    args = parser.parse_args([])
    for s in sections:
        # off by default, except a choices section with a default (the Kendall kernels)
        assert getattr(args, compare_module.dest(s)) == (tuple(s.default or ()) if s.takes == "choices" else
                                                         (False if s.takes == "switch" else None))


def test_every_compare_section_resolves_to_a_function_that_takes_its_value(compare_module):
    for s in _registry.compare_sections():
        fn = _registry.load(s.entry)
        params = list(inspect.signature(fn).parameters.values())
        required = [p for p in params if p.default is inspect.Parameter.empty
                    and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if s.takes == "switch":
            assert not required, f"{s.entry} needs arguments {required} that --{s.flag} does not give"
        else:
            assert params and params[0].kind in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD)
            assert len(required) <= 1 or (len(required) == 2 and required[1].name == "options"), s.entry
        if s.takes == "choices":
            module = importlib.import_module(s.entry.partition(":")[0])
            assert set(s.choices) == set(module.CHOICES), s.entry  # the names the section knows
            assert set(s.default or ()) <= set(s.choices)
