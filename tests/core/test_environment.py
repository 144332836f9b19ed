"""The typo guard (core/config/environment.py): an MMPREP_* variable nothing reads is named,
one that a setting or an engine of ours reads is not."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mmprep.core.config import unknown_environment_settings

ROOT = Path(__file__).resolve().parent.parent.parent
LIBRARIES = ("decoders", "families", "processors")


def test_a_variable_no_setting_reads_is_named():
    environ = {"MMPREP_MAX_FRAMS": "4", "MMPREP_MAX_FRAMES": "4", "HOME": "/root"}
    assert unknown_environment_settings(environ) == ["MMPREP_MAX_FRAMS"]


@pytest.mark.parametrize(
    "variable",
    [
        "MMPREP_PORT",  # mmprep serve's
        "mmprep_port",  # in any case, as pydantic-settings reads them
        "MMPREP_WORKER_PORT",  # mmprep worker's
        "MMPREP_TRANSFORMERS_MODEL",  # the transformers engine's, which checks its own
    ],
)
def test_a_variable_something_reads_is_not(variable):
    assert unknown_environment_settings({variable: "0"}) == []


def spelled_variables(root: Path) -> set[str]:
    """Every MMPREP_* name a source folder spells out."""
    return {
        node.value
        for path in root.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("MMPREP_")
    }


@pytest.mark.parametrize("library", LIBRARIES)
def test_the_guard_knows_every_variable_a_library_reads(library):
    """A library that reads an MMPREP_* variable of its own would have `mmprep serve` refuse
    it (as it refused MMPREP_TORCH_RESIZE while the processors read it): the guard must learn
    it first."""
    assert unknown_environment_settings(dict.fromkeys(spelled_variables(ROOT / library), "0")) == []


def test_the_library_check_finds_what_it_is_for(tmp_path):
    (tmp_path / "resize.py").write_text('if os.environ.get("MMPREP_TORCH_RESIZE", "1") == "0": pass\n')
    found = spelled_variables(tmp_path)
    assert unknown_environment_settings(dict.fromkeys(found, "0")) == ["MMPREP_TORCH_RESIZE"]
