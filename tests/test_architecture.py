"""The rules of docs/ARCHITECTURE.md, checked on the imports themselves: each room imports
only the rooms below it, only the two HTTP servers know the web framework, and the libraries
know nothing of the service."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Top to bottom; a room may import only rooms after it. Rooms on one line know nothing of each other.
LAYERS = [
    ["app/__main__"],
    ["app/cli"],
    ["app/preview"],
    ["app/bench"],
    ["app/testing"],
    ["app/rayserve"],
    ["app/api"],
    ["app/service"],
    ["app/workers", "app/vllm"],
    ["app/preprocess", "app/derender"],
    ["app/render"],
    ["app/engines", "app/media"],
    ["app/core"],
    ["app/model"],
    ["decoders", "processors", "app/__init__"],
]
WEB_FRAMEWORK = ("fastapi", "starlette", "uvicorn")
SERVES_HTTP = ("app/api", "app/workers/server.py", "app/testing", "app/cli.py")


def room_of(path: str) -> str:
    if path == "app":  # `from app import __version__`: the package's own __init__
        return "app/__init__"
    parts = path.removesuffix(".py").split("/")
    return "/".join(parts[:2]) if parts[0] == "app" else parts[0]


def imports(path: Path) -> set[str]:
    """The modules `path` imports, absolute (relative imports resolved)."""
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return found


def folder_name(module: str) -> str:
    """An installed name as the folder it lives in: mmprep.decoders.x is decoders/x,
    mmprep.processors.x processors/x, and the rest of mmprep is app/."""
    for installed, folder in (
        ("mmprep.decoders", "decoders"),
        ("mmprep.processors", "processors"),
        ("mmprep", "app"),
    ):
        if module == installed or module.startswith(installed + "."):
            return folder + module[len(installed) :]
    return module


def project_imports(path: Path) -> set[str]:
    """The rooms of the project that `path` imports, as paths relative to the root."""
    rooms = set()
    for module in map(folder_name, imports(path)):
        target = module.replace(".", "/")
        if (ROOT / f"{target}.py").exists() or (ROOT / target).is_dir():
            rooms.add(room_of(target))
    return rooms


SOURCES = sorted(p for folder in ("app", "decoders", "processors") for p in (ROOT / folder).rglob("*.py"))
LEVEL = {room: level for level, rooms in enumerate(LAYERS) for room in rooms}


def test_every_room_has_a_place_in_the_layers():
    assert {room_of(str(p.relative_to(ROOT))) for p in SOURCES} <= set(LEVEL)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_room_imports_only_rooms_below_it(path):
    room = room_of(str(path.relative_to(ROOT)))
    upward = sorted(other for other in project_imports(path) - {room} if LEVEL[other] <= LEVEL[room])
    assert not upward, f"{room} may not import {upward}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_http_servers_know_the_web_framework(path):
    relative = str(path.relative_to(ROOT))
    web = sorted(m for m in imports(path) if m.split(".")[0] in WEB_FRAMEWORK)
    if not relative.startswith(SERVES_HTTP):
        assert not web, f"{relative} imports {web}"
