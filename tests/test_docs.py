"""docs/ held to the code where a figure or a list can be: the defaults in deployment.md's
tables, its count of vLLM's flags, its lists of engines and families, the answer its
`/preview` example prints, library.md's families and presets, sampling.md's fixture count.
(The README's own are tests/test_readme.py's; the links, tests/cli/test_docs_links.py's.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx

from mmprep import families
from mmprep.core.config import Settings
from mmprep.engines.registry import ENGINES
from mmprep.processors import load_processor, preset_models
from mmprep.vllm_flags import counts
from tests.support.media import MEDIA
from tests.support.servers import LiveServer

REPO = Path(__file__).resolve().parent.parent
DEPLOYMENT = (REPO / "docs" / "deployment.md").read_text()
LIBRARY = (REPO / "docs" / "library.md").read_text()
SAMPLING = (REPO / "docs" / "sampling.md").read_text()
UNITS = {"": 1, "s": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def section(text: str, heading: str) -> str:
    """A page's section, from its heading to the next heading of any level."""
    start = text.index(f"\n{heading}\n")
    following = re.search(r"\n#+ ", text[start + len(heading) + 2 :])
    return text[start : start + len(heading) + 2 + following.start()] if following else text[start:]


def default_tables(text: str) -> list[tuple[str, str]]:
    """(flag, default as written) for each row of the tables whose second column is `default`."""
    rows = []
    for table in re.findall(r"^\| [^|]+ \| default \|.*?\n(?:\|.*\n)+", text, re.M):
        for line in table.splitlines()[2:]:
            name, written = (cell.strip() for cell in line.split("|")[1:3])
            flags = re.findall(r"`--([\w-]+)`", name)
            values = re.findall(r"(\d+)(?: x (\d+))?(?: (KiB|MiB|GiB|s)\b)?", written)
            rows += [(flag, value) for flag, value in zip(flags, values, strict=False)]
    return rows


def test_the_tables_defaults_are_the_settings():
    rows = default_tables(DEPLOYMENT)
    assert len(rows) >= 20  # the limits, connections and queue tables
    defaults = Settings()
    for flag, (number, times, unit) in rows:
        written = int(number) * int(times or 1) * UNITS[unit]
        actual = getattr(defaults, flag.replace("-", "_"))
        assert abs(actual - written) <= UNITS[unit] / 2, (
            f"--{flag}: the table says {written}, the default is {actual}"
        )


def test_the_count_of_vllms_flags_is_the_lists():
    said = section(DEPLOYMENT, "### vllm serve's command line")
    tally = counts()
    assert f"every one of `vllm serve`'s {sum(tally.values())} flags" in said
    for kind, words in (
        ("taken", "taken ("),
        ("always", "what they ask ("),
        ("renamed", "mmprep's own name ("),
        ("engine", "the\nengine's ("),
        ("front door", "vLLM's own front door's ("),
    ):
        assert f"{words}{tally[kind]}" in said, kind


def test_the_engines_listed_are_the_registered_ones():
    listed = re.findall(
        r"^- `([\w-]+)`", section(DEPLOYMENT, "## Engines: where the answers come from"), re.M
    )
    assert sorted(listed) == sorted(ENGINES.names())


def test_the_model_table_names_every_model_type():
    table = DEPLOYMENT[DEPLOYMENT.index("| family (`model_type`) |") :].split("\n\n", 1)[0]
    named = {name for line in table.splitlines()[2:] for name in re.findall(r"`(\w+)`", line.split("|")[1])}
    assert named == set(families.MODEL_TYPES)


def test_the_processors_families_are_the_registered_ones():
    paragraph = LIBRARY[LIBRARY.index("Families, by the names") :].split("\n\n", 1)[0]
    for name in families.FAMILIES:
        assert f"(`{name}`" in paragraph, name


def test_every_family_has_presets():
    """library.md: presets ship the published configs of models of every family."""
    assert {load_processor(model).family for model in preset_models()} == set(families.FAMILIES)


def test_the_fixture_count_is_the_recordings():
    recorded = json.loads((REPO / "tests" / "data" / "vllm_real" / "loader_picks.json").read_text())["files"]
    unopened = sum(all("error" in picks for picks in loaders.values()) for loaders in recorded.values())
    said = f"(`tests/data/media`: {len(recorded) - unopened} videos, and {unopened} files neither side"
    assert said in " ".join(SAMPLING.split())


def test_the_preview_example_answers_as_shown():
    example = section(DEPLOYMENT, "### `POST /preview`")
    body = re.search(r"-d '(.*?)'\n", example, re.S).group(1).replace("'\"$PWD\"'", str(REPO))
    shown = json.loads(
        re.sub(
            r'"data:image/png;base64,[^"]*"', '""', re.search(r"```json\n(.*?)```", example, re.S).group(1)
        )
    )
    with LiveServer(enable_preview=True, allowed_local_media_path=[MEDIA]) as server:
        answer = httpx.post(
            f"{server.url}/preview", content=body, headers={"content-type": "application/json"}
        ).json()
    assert answer["sheet"].startswith("data:image/png;base64,iVBORw0KGgo")
    assert answer["account"] == shown["account"]
    assert answer["timing"].keys() == shown["timing"].keys()
