"""The README for users, the docs for maintainers, and CI running what the README says."""

import re

from .conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_stays_short():
    assert len(README.splitlines()) < 120


def test_ci_runs_the_readmes_build_and_test_commands_as_written():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = re.findall(r"^    (pip install .*)$", README, flags=re.M)
    assert commands == [
        "pip install -e '.[capture]' && python build.py",
        "pip install -e '.[capture,test]' && python -m pytest",
    ]
    for command in commands:
        assert command.replace("pip install -e", "pip install -q -e") in ci


def test_the_readme_links_every_docs_file_and_only_files_that_exist():
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", README))
    present = {f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md")}
    assert linked == present


def test_links_between_docs_name_files_that_exist():
    for path in (ROOT / "docs").glob("*.md"):
        for target in re.findall(r"\]\(([\w.-]+\.md)\)", path.read_text(encoding="utf-8")):
            assert (path.parent / target).exists(), (path.name, target)
