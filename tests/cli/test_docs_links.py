"""Every link between the docs lands: the file exists, and the heading it points at is there
(anchors as GitHub makes them from headings), so a renamed section is caught here and not
by a reader."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = sorted([REPO / "README.md", REPO / "CHANGELOG.md", *DOCS.glob("*.md"), *DOCS.glob("decisions/*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """GitHub's anchor for each heading: lower case, punctuation but `-` and `_` dropped,
    spaces as hyphens; a repeated heading gets -1, -2, ..."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#+ (.+)$", FENCE.sub("", page.read_text()), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def local_links(page: Path) -> list[str]:
    return [
        target for target in LINK.findall(FENCE.sub("", page.read_text())) if not re.match(r"[a-z]+:", target)
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_local_link_lands(page):
    broken = []
    for target in local_links(page):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading makes #{anchor}")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)
