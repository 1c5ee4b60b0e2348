"""numtk._lib._optional: which optional packages count as installed."""

import sys

import pytest

from numtk._lib._optional import has_module, import_optional


def test_a_directory_of_caches_left_by_an_uninstall_is_not_the_package(tmp_path, monkeypatch):
    (tmp_path / "numtk_leftover_pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "numtk_real_ns" / "sub").mkdir(parents=True)
    (tmp_path / "numtk_real_ns" / "sub" / "__init__.py").write_text("")
    (tmp_path / "numtk_real_pkg").mkdir()
    (tmp_path / "numtk_real_pkg" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not has_module("numtk_leftover_pkg")
    with pytest.raises(ImportError, match="numtk_leftover_pkg"):
        import_optional("numtk_leftover_pkg", purpose="this test")
    assert has_module("numtk_real_ns")  # a namespace package with content is one
    assert has_module("numtk_real_pkg")
    assert import_optional("numtk_real_pkg", purpose="this test").__name__ == "numtk_real_pkg"
    assert not has_module("numtk_no_such_module")
    for name in ("numtk_leftover_pkg", "numtk_real_ns", "numtk_real_pkg"):
        sys.modules.pop(name, None)
