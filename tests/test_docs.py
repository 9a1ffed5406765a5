"""The README's rule tables are generated from the registry: a rule cannot go undocumented,
and no row claims what a rule does not do."""

from __future__ import annotations

from pathlib import Path

from coreml_lint.engine.docs import updated
from coreml_lint.rules import all_rules

README = Path(__file__).parents[1] / "README.md"


def test_readme_rule_tables_are_current():
    text = README.read_text(encoding="utf-8")
    assert updated(text) == text, "run: python -m coreml_lint.engine.docs README.md"


def test_every_rule_is_in_the_readme():
    text = README.read_text(encoding="utf-8")
    for rule in all_rules():
        assert f"| {rule.code} | {rule.name} |" in text


def test_docs_stand_alone():
    """The project's documentation never sends users to files outside the repository."""
    root = README.parent
    for path in [README, *root.glob("docs/*.md"), *root.glob("coreml_lint/**/*.py")]:
        assert "pitfalls.md" not in path.read_text(encoding="utf-8"), path
