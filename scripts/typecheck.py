"""mypy over the code as it is imported, with its messages naming the repository's files.

    python scripts/typecheck.py                    # what pyproject.toml lists (lint.sh, pre-commit)
    python scripts/typecheck.py decoders app/api   # these folders or files only

The installed names are not the folders: app/ is `mmprep`, decoders/, families/ and processors/
are `mmprep.decoders`, `mmprep.families` and `mmprep.processors` (pyproject.toml's
package-dir). mypy finds a module by its path, and the editable install's import hook is
invisible to it, so the folders are linked into the installed layout under build/import-tree/
(what pyproject.toml's mypy section checks), and each path mypy prints is turned back into the
repository's own.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TREE = Path("build/import-tree")


def package_folders() -> dict[str, str]:
    """Each installed package (`mmprep.decoders`) and the folder it comes from (`decoders`)."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    return pyproject["tool"]["setuptools"]["package-dir"]


def link_tree(folders: dict[str, str]) -> None:
    """Build TREE afresh: a folder per mapped package, holding links to its folder's entries
    (a parent is made before its subpackages, which sort after it)."""
    shutil.rmtree(REPO / TREE, ignore_errors=True)
    for package, folder in sorted(folders.items()):
        target = REPO / TREE / package.replace(".", "/")
        target.mkdir(parents=True, exist_ok=True)
        for entry in (REPO / folder).iterdir():
            if entry.name != "__pycache__":
                (target / entry.name).symlink_to(entry)


def repository_path(line: str, folders: dict[str, str]) -> str:
    """`build/import-tree/mmprep/decoders/index.py:3: error` as `decoders/index.py:3: error`."""
    for package in sorted(folders, key=len, reverse=True):  # mmprep.decoders before mmprep
        linked = f"{TREE / package.replace('.', '/')}/"
        if line.startswith(linked):
            return f"{folders[package]}/{line[len(linked) :]}"
    return line


def tree_path(argument: str, folders: dict[str, str]) -> str:
    """A repository path given to check (`decoders`, `app/api/chat.py`) as its linked path;
    any other argument as it is."""
    first, _, rest = argument.partition("/")
    for package, folder in folders.items():
        if first == folder:
            return str(TREE / package.replace(".", "/") / rest).rstrip("/")
    return argument


def main(arguments: list[str]) -> int:
    folders = package_folders()
    link_tree(folders)
    arguments = [tree_path(argument, folders) for argument in arguments]
    mypy = subprocess.run(
        [sys.executable, "-m", "mypy", *arguments], cwd=REPO, capture_output=True, text=True, check=False
    )
    for line in mypy.stdout.splitlines():
        if arguments and line.startswith("pyproject.toml: note: unused section"):
            continue  # a part of the tree leaves some of the config's sections unused
        print(repository_path(line, folders))
    print(mypy.stderr, end="", file=sys.stderr)
    return mypy.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
