"""The articles the console quotes are docs/rules.md's, word for word."""

from __future__ import annotations

from pathlib import Path

from surveil.analysis import articles

RULES = Path(__file__).resolve().parents[3] / "docs" / "rules.md"


def test_the_packaged_articles_are_docs_rules_md() -> None:
    assert articles.packaged() == articles.section_of(RULES.read_text(encoding="utf-8")), (
        "docs/rules.md changed: copy it with .venv/bin/python -m surveil.analysis.articles docs/rules.md"
    )


def test_every_article_from_1_to_18_is_there_with_its_heading() -> None:
    held = articles.articles()
    assert sorted(held) == list(range(1, 19))
    assert held[9][0] == "Art. 9: The third card"
    assert "on **3**, if the Player's third card is not an 8" in held[9][1]


def test_a_reference_quotes_the_articles_it_names() -> None:
    assert articles.numbers("Art. 9(4)(1)") == [9]
    assert articles.numbers("Art. 2, 7-8") == [2, 7, 8]
    assert articles.numbers("Art. 2.1") == [2]
    assert articles.numbers("Art. 5, 11-13: the declared totals") == [5, 11, 12, 13]
    quote = articles.quote("Art. 17-18")
    assert quote is not None and quote.heading == "Art. 17: Payouts · Art. 18: Commission"
    assert "<td>8 to 1</td>" in quote.html and "5% commission" in quote.html
    assert articles.quote("house rule") is None


def test_the_quoted_text_is_escaped() -> None:
    quote = articles.quote("Art. 16")
    assert quote is not None and "<script" not in quote.html
