"""What `mmprep ... --help` shows a newcomer: every line fits the terminal, and the lists of
choices in it are the registries' own, so a new family or engine is named without an edit."""

from __future__ import annotations

import re

import pytest

from mmprep.cli import main
from mmprep.engines.registry import ENGINES
from mmprep.families import FAMILIES

COMMANDS: list[list[str]] = [[], ["serve"], ["worker"], ["bench"], ["bench-decode"], ["preview"]]
# argparse keeps an option group of its usage line whole ("[--x | --no-x]"): a line holding
# one such group alone is as short as it can be.
USAGE_GROUP = re.compile(r" +\[[^][]+\]")


def help_text(args: list[str], capsys, monkeypatch, columns: int = 80) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main([*args, "--help"]) == 0
    return capsys.readouterr().out


def flag_help(text: str, flag: str) -> str:
    """A flag's help in `mmprep serve --help`, its lines joined."""
    match = re.search(rf"\n  {flag} .*?(?=\n  -)", text, re.S)
    assert match, flag
    return " ".join(match.group(0).split())


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: " ".join(["mmprep", *args]))
@pytest.mark.parametrize("columns", [80, 120])
def test_every_help_line_fits_the_terminal(args, columns, capsys, monkeypatch):
    text = help_text(args, capsys, monkeypatch, columns)
    too_long = [line for line in text.splitlines() if len(line) > columns and not USAGE_GROUP.fullmatch(line)]
    assert not too_long, "\n".join(too_long)
    assert not re.search(r"--[a-z][\w-]*-$", text, re.M)  # no flag's name broken at a hyphen


def test_mmprep_help_wraps_each_setting_under_its_text(capsys, monkeypatch):
    text = help_text([], capsys, monkeypatch)
    assert "\n  --host                      address to listen on  [MMPREP_HOST]\n" in text
    # a flag longer than the column has its text on the next line, under the others'
    assert "\n  --enable-force-include-usage\n                              vllm serve's" in text


def test_processor_help_names_every_family(capsys, monkeypatch):
    described = flag_help(help_text(["serve"], capsys, monkeypatch), "--processor str")
    assert f"a family ({', '.join(FAMILIES)})" in described


def test_engine_help_names_every_engine(capsys, monkeypatch):
    described = flag_help(help_text(["serve"], capsys, monkeypatch), "--engine str")
    assert all(f"{name} (" in described for name in ENGINES.names()), described


def test_mmprep_without_a_command_says_so_and_shows_the_usage(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: CLI subcommand is required") and "usage: mmprep" in err
