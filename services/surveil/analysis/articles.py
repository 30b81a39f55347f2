"""The articles of the rules as the project reads them (docs/rules.md, "What each article says"),
for the pages that quote them.

The text ships with the package (``analysis/rules/articles.md``, a copy of that section), so an
installed console quotes what the repository's docs say; ``tests/unit/analysis/test_articles.py``
fails when the two differ, and ``python -m surveil.analysis.articles docs/rules.md`` copies the
section again.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path

from markdown_it import MarkdownIt
from markupsafe import Markup

SECTION = "## What each article says"
PACKAGED = "rules/articles.md"
_HEADING = re.compile(r"^### Art\. (\d+): (.+)$", re.M)


def section_of(rules_md: str) -> str:
    """The section of docs/rules.md that says what each article says (its heading included)."""
    start = rules_md.index(SECTION)
    end = rules_md.find("\n## ", start + len(SECTION))
    return rules_md[start : end if end >= 0 else len(rules_md)].rstrip() + "\n"


@cache
def packaged() -> str:
    return files("surveil.analysis").joinpath(PACKAGED).read_text(encoding="utf-8")


@cache
def articles() -> dict[int, tuple[str, str]]:
    """Article number -> (heading, its text in Markdown)."""
    text = packaged()
    found = list(_HEADING.finditer(text))
    out = {}
    for n, match in enumerate(found):
        end = found[n + 1].start() if n + 1 < len(found) else text.find("\n### ", match.end())
        body = text[match.end() : end if end >= 0 else len(text)]
        out[int(match.group(1))] = (f"Art. {match.group(1)}: {match.group(2)}", body.strip())
    return out


@dataclass(frozen=True, slots=True)
class Quote:
    heading: str  # "Art. 9: The third card" (or several, joined)
    html: Markup
    paragraph: bool  # the reference names a paragraph, not only the article


def numbers(reference: str) -> list[int]:
    """The articles a reference names: ``"Art. 9(4)(1)"`` -> [9]; ``"Art. 2, 7-8"`` -> [2, 7, 8]."""
    found: list[int] = []
    head = reference.split(":", 1)[0]
    for first, last in re.findall(r"(\d+)(?:\.\d+)?(?:\([^)]*\))*(?:\s*-\s*(\d+))?", head.removeprefix("Art.")):
        a = int(first)
        b = int(last) if last else a
        found += [n for n in range(a, min(b, a + 6) + 1) if n not in found]
    return found


def quote(reference: str) -> Quote | None:
    """The text of the articles ``reference`` names, as HTML; None when it names none we hold."""
    known = articles()
    wanted = [n for n in numbers(reference) if n in known][:4]
    if not wanted:
        return None
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    parts = [md.render(f"**{known[n][0]}**\n\n{known[n][1]}") for n in wanted]
    return Quote(" · ".join(known[n][0] for n in wanted), Markup("".join(parts)), "(" in reference or "." in reference.split(" ", 1)[-1])


if __name__ == "__main__":
    source = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/rules.md")
    target = Path(__file__).with_name("rules") / "articles.md"
    target.write_text(section_of(source.read_text(encoding="utf-8")), encoding="utf-8")
    print(target)
