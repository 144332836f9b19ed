"""The rules of docs/ARCHITECTURE.md, checked on the imports themselves: each room imports
only the rooms below it, only the two HTTP servers know the web framework, the libraries
know nothing of the service, and nothing outside families/ tells model families apart."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENGINE_INTERFACE = "app/engines/base.py+prepared.py"
INTERFACE_MODULES = ("app/engines/base", "app/engines/prepared")
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
    ["app/engines"],
    ["app/workers", "app/vllm"],
    ["app/preprocess", "app/derender"],
    ["app/render"],
    [ENGINE_INTERFACE, "app/media"],
    ["app/core"],
    ["app/model"],
    ["decoders", "processors", "app/__init__"],
    ["families"],
]
WEB_FRAMEWORK = ("fastapi", "starlette", "uvicorn")
# The engines live in app/engines, above the protocols some of them speak (app/workers,
# app/vllm); the interface they share (the Engine protocol, its outputs, PreparedRequest) is
# a room of its own, low in the house: every room that hands work to an engine imports it.
SERVES_HTTP = ("app/api", "app/workers/server.py", "app/testing", "app/cli.py")


def room_of(path: str) -> str:
    if path == "app":  # `from app import __version__`: the package's own __init__
        return "app/__init__"
    stem = path.removesuffix(".py")
    if stem in INTERFACE_MODULES:
        return ENGINE_INTERFACE
    parts = stem.split("/")
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
    mmprep.families.x families/x, mmprep.processors.x processors/x, and the rest of mmprep is app/."""
    for installed, folder in (
        ("mmprep.decoders", "decoders"),
        ("mmprep.families", "families"),
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


CODE_FOLDERS = ("app", "decoders", "families", "processors")
SOURCES = sorted(p for folder in CODE_FOLDERS for p in (ROOT / folder).rglob("*.py"))
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


# -- model families: what differs between them is asked of their module (families/), never
# decided by comparing their names elsewhere.
# app/testing builds the test vocabularies and model folders of each family by its name (test
# data, not behaviour).
FAMILY_NAMES_ALLOWED = ("families/", "app/testing/")


def family_names() -> set[str]:
    """Every family's name and config.json model_type, and the token names and string
    placeholders of each (what a table of one family's tokens would hold)."""
    from mmprep import families

    names = set(families.FAMILIES) | set(families.MODEL_TYPES)
    for name in families.FAMILIES:
        family = families.get(name)
        names |= set(family.token_names.values()) | set(family.string_placeholders.values())
    return names


def family_comparisons(path: Path, names: set[str]) -> list[str]:
    """`family == "qwen3_vl"`, `family in SOME_FAMILIES`, `model_type in ("qwen2_vl", ...)`: a
    comparison one side of which is named after a family or model type and the other a
    literal or a module constant (a table of families); and any string literal that is a
    family name, a model type or one of a family's token names (a table keyed by them, a
    name held in a variable, a family's tokens written out)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_names_a_family(side) for side in sides) and any(_is_table(side) for side in sides):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
            found.append((node.lineno, repr(node.value)))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def _names_a_family(node: ast.expr) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return "famil" in name.lower() or "model_type" in name.lower()


def _is_table(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)  # not `family is None`
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return True
    return isinstance(node, ast.Name) and node.id.isupper()


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_family_modules_tell_families_apart(path):
    relative = str(path.relative_to(ROOT))
    if relative.startswith(FAMILY_NAMES_ALLOWED):
        return
    found = family_comparisons(path, family_names())
    assert not found, f"{relative} tells model families apart (ask mmprep.families instead): {found}"


def test_the_family_check_finds_what_it_is_for(tmp_path):
    """The check itself, on the comparisons that main held before the family modules."""
    code = tmp_path / "before.py"
    code.write_text(
        "if config.family != 'qwen3_vl': pass\n"
        "ok = family in DEVICE_NORMALIZED_FAMILIES\n"
        "if model_type in _MODEL_TYPES: pass\n"
        "TABLE = {'qwen3_vl_moe': 1}\n"
        "same = processor.family == folder.family\n"  # two families compared: allowed
        "PAD = '<|image_pad|>'\n"
    )
    assert [line.split(":")[0] for line in family_comparisons(code, family_names())] == [
        "line 1",
        "line 1",
        "line 2",
        "line 3",
        "line 4",
        "line 6",
    ]


def test_the_engines_interface_is_a_room_below_the_engines():
    assert room_of("app/engines/base.py") == room_of("app/engines/prepared.py") == ENGINE_INTERFACE
    assert room_of("app/engines/workers.py") == room_of("app/engines/vllm_generate.py") == "app/engines"
    assert LEVEL["app/engines"] < LEVEL["app/vllm"] < LEVEL["app/render"] < LEVEL[ENGINE_INTERFACE]
