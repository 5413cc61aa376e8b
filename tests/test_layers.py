"""The architecture is checked, not just drawn: imports point down through the layers of DESIGN.md, and only
the heavy optional packages named in pyproject.toml are imported inside functions."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("simpact", "solvers", "real2sim", "robot")


def _lazy_packages() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-module-level-imports"]


def _function_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted module) of every import inside a function body."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if in_function and isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name) for alias in child.names)
            elif in_function and isinstance(child, ast.ImportFrom):
                base = "." * child.level + (child.module or "")
                found.extend((child.lineno, f"{base}.{alias.name}".lstrip(".")) for alias in child.names)
            visit(child, inside)

    visit(tree, False)
    return found


def _is_lazy(module: str, lazy: list[str]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in lazy)


def test_imports_inside_functions_are_only_the_heavy_optional_packages():
    lazy = _lazy_packages()
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, module in _function_imports(ast.parse(path.read_text()))
        if not _is_lazy(module, lazy)
    ]
    assert offenders == [], "move these imports to module top (or the code to its layer):\n" + "\n".join(
        offenders
    )


def test_the_function_import_scan_sees_nested_imports():
    tree = ast.parse(
        "import os\ndef f():\n    import cv2\n    def g():\n        from simpact.core import scene\n"
    )
    assert _function_imports(tree) == [(3, "cv2"), (5, "simpact.core.scene")]
    assert _is_lazy("google.genai.types", ["google.genai"]) and not _is_lazy("google", ["google.genai"])


def _lint_imports() -> str:
    path = Path(sys.executable).with_name("lint-imports")
    found = str(path) if path.exists() else shutil.which("lint-imports")
    if found is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    return found


def _layer_modules() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (layers,) = [c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return [name.strip() for layer in layers for name in layer.replace("|", ":").split(":")]


def test_every_module_sits_in_a_layer():
    """A new module outside every layer would escape the contract: each one is in (or under) a layer."""
    layers = _layer_modules()
    modules = [
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name != "__init__.py" or path.parent.name not in PACKAGES
    ]
    outside = [m for m in modules if not any(m == layer or m.startswith(layer + ".") for layer in layers)]
    assert outside == [], f"add these modules to a layer in pyproject.toml: {outside}"


def test_import_contracts_hold():
    done = subprocess.run([_lint_imports(), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in done.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    """The contract can fail: a core module importing the planner is reported."""
    mirror = tmp_path / "tree"
    for package in PACKAGES:
        shutil.copytree(ROOT / package, mirror / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", mirror / "pyproject.toml")
    bad = mirror / "simpact" / "core" / "scene.py"
    bad.write_text(bad.read_text() + "\nimport simpact.planner.loop  # noqa\n")
    done = subprocess.run(
        [_lint_imports(), "--no-cache"],
        cwd=mirror,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(mirror), "PATH": ""},
    )
    assert done.returncode != 0
    assert "simpact.core.scene -> simpact.planner" in done.stdout
