"""The README is a map: short, and every relative link in it and in docs/ resolves (issue #46)."""
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "results" / "findings.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_a_short_map():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) < 200
    assert "## How it works: a map" in text and "| folder | role |" in text
    for folder in ("graphs", "targets", "canaries", "attacks", "audit", "docs"):
        assert f"`{folder}/`" in text and (REPO / folder).is_dir()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:", "#")):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, f"{page.name}: links that resolve nowhere: {broken}"
