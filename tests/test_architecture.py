"""The rules of docs/ARCHITECTURE.md, checked on the imports themselves: each room imports
only the rooms below it, only the two HTTP servers know the web framework, the libraries
know nothing of the service, and nothing outside mmprep.families tells model families apart."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The four source roots; below each, the folders are the import names (app/mmprep/api is
# mmprep.api, decoders/mmprep/decoders is mmprep.decoders): a room is named as it is imported.
SOURCE_ROOTS = ("app", "decoders", "families", "processors")
# Top to bottom; a room may import only rooms after it. Rooms on one line know nothing of each other.
LAYERS = [
    ["mmprep.__main__"],
    ["mmprep.cli"],
    ["mmprep.vllm_flags"],
    ["mmprep.preview", "mmprep.rayserve"],
    ["mmprep.api"],
    ["mmprep.service"],
    ["mmprep.engines", "mmprep.transport"],
    ["mmprep.workers", "mmprep.vllm"],
    ["mmprep.preprocess", "mmprep.derender"],
    ["mmprep.render"],
    ["mmprep.modalities"],
    ["mmprep.interface", "mmprep.media"],
    ["mmprep.core"],
    # bench is a client of any server: it knows only the decoders (bench-decode, the media suffixes)
    ["mmprep.model", "mmprep.bench"],
    ["mmprep.decoders", "mmprep.processors"],
    ["mmprep.families"],
]
WEB_FRAMEWORK = ("fastapi", "starlette", "uvicorn")
# The engines live in mmprep.engines, above the protocols some of them speak (mmprep.workers,
# mmprep.vllm); the interface they share (the Engine protocol, its outputs, PreparedRequest),
# mmprep.interface, is a room of its own, low in the house: every room that hands work to an
# engine imports it.
SERVES_HTTP = ("mmprep.api", "mmprep.transport", "mmprep.workers.server", "mmprep.cli")


def module_of(path: Path) -> str:
    """A source file's import name: app/mmprep/api/openai/responses.py is mmprep.api.openai.responses."""
    parts = path.relative_to(ROOT).with_suffix("").parts[1:]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room_of(module: str) -> str:
    """The room a module belongs to: mmprep.api.openai.responses is in mmprep.api."""
    return ".".join(module.split(".")[:2])


def imports(path: Path) -> set[str]:
    """The modules `path` imports, absolute (relative imports resolved)."""
    module = module_of(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            found |= {name} | {f"{name}.{alias.name}" for alias in node.names}
    return found


MODULES = {module_of(p): p for root in SOURCE_ROOTS for p in (ROOT / root).rglob("*.py")}
SOURCES = sorted(MODULES.values())


def project_imports(path: Path) -> set[str]:
    """The rooms of the project that `path` imports."""
    return {room_of(module) for module in imports(path) if module in MODULES}


LEVEL = {room: level for level, rooms in enumerate(LAYERS) for room in rooms}


def test_every_room_has_a_place_in_the_layers():
    assert {room_of(module) for module in MODULES} <= set(LEVEL)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_room_imports_only_rooms_below_it(path):
    room = room_of(module_of(path))
    upward = sorted(other for other in project_imports(path) - {room} if LEVEL[other] <= LEVEL[room])
    assert not upward, f"{room} may not import {upward}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_http_servers_know_the_web_framework(path):
    module = module_of(path)
    web = sorted(m for m in imports(path) if m.split(".")[0] in WEB_FRAMEWORK)
    if not module.startswith(SERVES_HTTP):
        assert not web, f"{module} imports {web}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_product_imports_nothing_of_the_tests(path):
    """What the tests, benchmarks and scripts share (tests/support) is beside the tests, not
    in the installed package: the product imports none of it."""
    tests = sorted(module for module in imports(path) if module.split(".")[0] == "tests")
    assert not tests, f"{module_of(path)} imports {tests}"


# -- model families: what differs between them is asked of their module (families/), never
# decided by comparing their names elsewhere in the product. Test support (tests/support)
# builds the test vocabularies and model folders of each family by its name (test data, not
# behaviour): it is none of the product's modules, and no module of the product imports it.
FAMILY_NAMES_ALLOWED = ("mmprep.families",)


def family_names() -> set[str]:
    """Every family's name and config.json model_type, and the token names and string
    placeholders of each (what a table of one family's tokens would hold; a side the family
    does not take, as Gemma 3's video, has none)."""
    from mmprep import families

    names = set(families.FAMILIES) | set(families.MODEL_TYPES)
    for name in families.FAMILIES:
        family = families.get(name)
        names |= set(family.token_names.values())
        names |= {side.placeholder for side in family.sides.values() if side.taken}
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
    module = module_of(path)
    if module.startswith(FAMILY_NAMES_ALLOWED):
        return
    found = family_comparisons(path, family_names())
    assert not found, f"{module} tells model families apart (ask mmprep.families instead): {found}"


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
    assert room_of("mmprep.interface.engine") == room_of("mmprep.interface.prepared") == "mmprep.interface"
    assert room_of("mmprep.engines.workers") == room_of("mmprep.engines.vllm_generate") == "mmprep.engines"
    assert LEVEL["mmprep.engines"] < LEVEL["mmprep.vllm"] < LEVEL["mmprep.render"] < LEVEL["mmprep.interface"]


def test_every_source_file_is_named_as_it_is_imported():
    """The folders are the import names (pyproject.toml's layout): a reader's tools resolve
    `mmprep.decoders.index` to decoders/mmprep/decoders/index.py with no hook or link."""
    import importlib.util

    for module, path in MODULES.items():
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin == str(path), module


# -- the endpoint families (app/mmprep/api's folders, as vLLM's entrypoints/openai/<endpoint>/):
# each owns its router and attaches it (api_router.attach_router(app), called by the app
# factory); what they share is mmprep.api.common, below them all. A family imports no other
# family's modules, and the common module imports no family.
API_COMMON = "mmprep.api.common"
API_FAMILIES = sorted(
    module
    for module, path in MODULES.items()
    if path.name == "__init__.py"
    and module.count(".") == 2
    and module.startswith("mmprep.api.")
    and module != API_COMMON
)


def api_family(module: str) -> str | None:
    """The endpoint family (or the common module) `module` is in: mmprep.api.openai.completions
    is in mmprep.api.openai; the app itself (mmprep.api.app, mmprep.api.auth) is in none."""
    package = ".".join(module.split(".")[:3])
    return package if package in (*API_FAMILIES, API_COMMON) else None


def reaches_across_families(module: str, imported: set[str]) -> list[str]:
    """What `module` imports of another endpoint family (or, from the common module, of any)."""
    own = api_family(module)
    if own is None:
        return []
    return sorted(name for name in imported if api_family(name) not in (None, own, API_COMMON))


def test_every_endpoint_family_attaches_its_own_router():
    from mmprep.api.app import FAMILIES

    assert API_FAMILIES == [
        "mmprep.api.anthropic",
        "mmprep.api.openai",
        "mmprep.api.preview",
        "mmprep.api.probes",
        "mmprep.api.scale_out",
    ]
    assert sorted(family.__name__ for family in FAMILIES) == [
        f"{family}.api_router" for family in API_FAMILIES
    ]
    for family in FAMILIES:
        assert callable(family.attach_router) and family.router.routes, family.__name__


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_an_endpoint_family_imports_only_its_own_modules_and_the_common_one(path):
    across = reaches_across_families(module_of(path), {name for name in imports(path) if name in MODULES})
    assert not across, f"{module_of(path)} imports another endpoint family's modules: {across}"


def test_the_endpoint_family_check_finds_what_it_is_for():
    """The check itself, on the imports main held before each family had its router (issue 57)."""
    before = {
        "mmprep.api.openai.completions": {"mmprep.api.scale_out.tokenize", "mmprep.api.common.chat"},
        "mmprep.api.anthropic.messages": {"mmprep.api.openai.responses", "mmprep.api.anthropic.api_router"},
        "mmprep.api.common.chat": {"mmprep.api.preview.page", "mmprep.api.common.errors"},
        "mmprep.api.app": {"mmprep.api.openai.api_router"},  # the app attaches every family: allowed
    }
    assert {module: reaches_across_families(module, imported) for module, imported in before.items()} == {
        "mmprep.api.openai.completions": ["mmprep.api.scale_out.tokenize"],
        "mmprep.api.anthropic.messages": ["mmprep.api.openai.responses"],
        "mmprep.api.common.chat": ["mmprep.api.preview.page"],
        "mmprep.api.app": [],
    }


LIBRARIES = ("mmprep.decoders", "mmprep.processors", "mmprep.families")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_library_is_imported_through_its_face_only(path):
    """From outside a library, `from mmprep.decoders import X`, never a module inside it:
    the face (its __init__'s __all__) is all another room may rely on."""
    room = room_of(module_of(path))
    inside = sorted(
        module
        for module in imports(path)
        if module in MODULES
        and room_of(module) in LIBRARIES
        and room_of(module) != room
        and module != room_of(module)
    )
    assert not inside, f"{module_of(path)} reaches inside a library: {inside}"


FOLDERS_ALONE = """
import importlib, sys
# Forget the editable install's hooks: only the folders on sys.path may find mmprep.
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path_hooks[:] = [h for h in sys.path_hooks if "__editable__" not in getattr(h, "__module__", "")]
sys.path[:] = [p for p in sys.path if "__editable__" not in p]
sys.path_importer_cache.clear()
sys.path[:0] = sys.argv[1:]
failed = []
for module in sys.stdin.read().split():
    try:
        spec = importlib.util.find_spec(module)
        if not module.endswith("__main__"):  # that one runs the command
            importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name.split(".")[0] == "mmprep":  # ours not found; a missing extra (ray, torch) is fine
            failed.append(f"{module}: {error}")
    except Exception as error:
        failed.append(f"{module}: {type(error).__name__}: {error}")
    else:
        if spec is None or not spec.origin.startswith(tuple(sys.argv[1:])):
            failed.append(f"{module} came from {spec and spec.origin}")
print("\\n".join(failed))
"""


@pytest.mark.slow  # a Python process importing every module
def test_every_module_imports_from_the_source_folders_alone():
    """With the four source roots on PYTHONPATH and no install hook, Python resolves every
    mmprep module to its file: `mmprep` is a namespace package over the roots, as a type
    checker or an editor reads them."""
    import subprocess
    import sys

    roots = [str(ROOT / root) for root in SOURCE_ROOTS]
    result = subprocess.run(
        [sys.executable, "-c", FOLDERS_ALONE, *roots],
        input="\n".join(sorted(MODULES)),
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", result.stdout


# -- modalities: what differs between an image and a video is asked of its record
# (app/mmprep/modalities), never decided by comparing the modality's name elsewhere; in the
# libraries too, where a family's rules for one modality are its side for it
# (mmprep.families.Side, `family.sides[name]`) and a processor config's own side answers.
# The client API translations compare their own wire formats' types (Anthropic's "image"
# block, the Responses API's input types) as they map them to chat parts; bench is a client,
# and sorts its own input files.
MODALITY_NAMES_ALLOWED = (
    "mmprep.modalities",
    "mmprep.api.common.messages_protocol",
    "mmprep.api.common.responses_protocol",
    "mmprep.bench",
)


def modality_names() -> set[str]:
    """Every modality's name and content part type."""
    from mmprep.modalities import MODALITIES

    return {name for modality in MODALITIES.values() for name in (modality.name, modality.part_type)}


def modality_comparisons(path: Path, names: set[str]) -> list[str]:
    """`kind == "video"`, `part["type"] in ("image", "video")`: a comparison one side of which
    is a modality's name (or a literal tuple holding one); and a table keyed by them."""

    def names_one(node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(names_one(element) for element in node.elts)
        return False

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare) and any(names_one(side) for side in [node.left, *node.comparators]):
            found.append((node.lineno, ast.unparse(node)))
        elif (
            isinstance(node, ast.Dict)
            and any(
                isinstance(key, ast.Constant) and key.value in names and key.value != "type"
                for key in node.keys
            )
            and not any(isinstance(key, ast.Constant) and key.value == "type" for key in node.keys)
        ):
            found.append((node.lineno, ast.unparse(node)[:80]))
    return [f"line {line}: {what}" for line, what in sorted(found)]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_modality_modules_tell_modalities_apart(path):
    module = module_of(path)
    if module.startswith(MODALITY_NAMES_ALLOWED):
        return
    found = modality_comparisons(path, modality_names())
    assert not found, (
        f"{module} tells modalities apart (ask mmprep.modalities, or in the libraries the "
        f"family's side for the modality, instead): {found}"
    )


def test_the_modality_check_finds_what_it_is_for(tmp_path):
    """The check itself, on the comparisons main held before the modality records."""
    code = tmp_path / "before.py"
    code.write_text(
        "if item.kind == 'video': pass\n"
        "if part['type'] in ('image', 'video'): pass\n"
        "MEDIA_PART_TYPES = {'image_url': 'image', 'video_url': 'video'}\n"
        "same = item.kind == other.kind\n"  # two items compared: allowed
        "part = {'type': 'video_url', 'video_url': {'url': url}}\n"  # a content part, as a client writes it
        # what families/ and processors/ held before their sides (issue 48)
        "config = {'image': self.image_config, 'video': self.video_config}[kind]\n"
        "defaults = IMAGE if kind == 'image' else VIDEO\n"
        "side = family.sides[item.kind]\n"  # a lookup by the item's own name: allowed
    )
    assert [line.split(":")[0] for line in modality_comparisons(code, modality_names())] == [
        "line 1",
        "line 2",
        "line 3",
        "line 6",
        "line 7",
    ]
