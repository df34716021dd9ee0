"""Every relative link in README.md and docs/ reaches a file, and every `#anchor` a heading of that file.

The user guide is spread over docs/; a moved or renamed page must not leave a link behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.environment import ROOT

PAGES = sorted([ROOT / "README.md", ROOT / "charts" / "accelpool" / "README.md", *(ROOT / "docs").rglob("*.md")])
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+)$")


def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The fragments of `page`'s headings (outside fenced blocks)."""
    found: set[str] = set()
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := _HEADING.match(line)):
            found.add(github_anchor(match.group(1)))
    return found


def relative_links(page: Path) -> list[str]:
    """The links of `page` that point into the repository (not to a URL); code (fenced or inline, where a
    regular expression such as `^[a-z]([-a-z0-9]*)?` looks like one) holds none."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    text = re.sub(r"(`+).*?\1", "", text)
    return [url for url in _LINK.findall(text) if not re.match(r"^[a-z]+:", url)]


def test_the_docs_are_found() -> None:
    assert ROOT / "docs" / "README.md" in PAGES and len(PAGES) > 20


def broken_links(page: Path) -> list[str]:
    """What is wrong with each link of `page` that does not reach its file or its heading."""
    broken = []
    for url in relative_links(page):
        path, _, fragment = url.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{url}: no file {path}")
        elif fragment and target.suffix == ".md" and fragment not in anchors(target):
            broken.append(f"{url}: no heading #{fragment} in {target.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_reaches_its_file_and_heading(page: Path) -> None:
    assert not broken_links(page), f"{page.relative_to(ROOT)}: " + "; ".join(broken_links(page))


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# A title: here\n\n[ok](#a-title-here) [gone](missing.md) [no heading](page.md#nothing) `[a](b)`\n"
    )
    assert broken_links(page) == ["missing.md: no file missing.md", "page.md#nothing: no heading #nothing in page.md"]
