"""The reference docs stay true to the tree they describe.

- ``docs/architecture.md`` names every package under ``gateway/`` (each directory with an
  ``__init__.py``), as ``stored/`` or ``gateway/stored/``;
- every record in ``docs/decisions/`` is listed in its ``README.md`` index, every link there
  resolves, and each record is a ``NNNN-title.md`` file with a unique number and the four
  parts (Context, Decision, Figures, Status);
- every source file whose comments send the reader to ``docs/performance.md`` for figures
  is named there, so the pointer leads somewhere.

The last tests run each check on a made-up tree or text with one thing missing, so none of
them can pass by checking nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
DECISIONS = ROOT / "docs" / "decisions"
PERFORMANCE = ROOT / "docs" / "performance.md"
INDEX = "README.md"
RECORD_NAME = re.compile(r"(\d{4})-[a-z0-9]+(?:-[a-z0-9]+)*\.md")
PARTS = ("Context", "Decision", "Figures", "Status")
SOURCE_DIRS = ("gateway", "validator", "tests")


def packages(root: Path) -> list[str]:
    """Every package below ``root`` (a directory with an ``__init__.py``), as a path
    relative to ``root`` (``"stored"``, ``"dialects/openai"``); ``root`` itself excluded."""
    return sorted(
        init.parent.relative_to(root).as_posix()
        for init in root.rglob("__init__.py")
        if init.parent != root and "__pycache__" not in init.parts
    )


def unnamed_packages(names: Iterable[str], text: str) -> list[str]:
    """The packages ``text`` does not name as ``<name>/`` or ``gateway/<name>/``, where
    the name starts a path (``restored/`` does not name ``stored/``)."""
    return [
        name
        for name in names
        if not re.search(r"(?<![\w./-])(?:gateway/)?" + re.escape(name) + "/", text)
    ]


def unindexed_records(files: Iterable[str], index: str) -> list[str]:
    """The files not linked from the index text (``](file)``)."""
    return [name for name in files if f"]({name})" not in index]


def broken_links(index: str, files: Iterable[str]) -> list[str]:
    """Relative links of the index to records that are not in ``files``."""
    present = set(files)
    return [
        target
        for target in re.findall(r"\]\(([^)#]+\.md)\)", index)
        if "/" not in target and target not in present
    ]


def record_problems(name: str, text: str) -> list[str]:
    """What is wrong with one decision record: its file name, its title, its parts."""
    match = RECORD_NAME.fullmatch(name)
    if match is None:
        return [f"{name}: not named NNNN-title.md (lower case, hyphens)"]
    problems = []
    if not text.startswith(f"# {match.group(1)}. "):
        problems.append(f"{name}: the first line is not '# {match.group(1)}. <title>'")
    headings = re.findall(r"^## (.+?)\s*$", text, flags=re.MULTILINE)
    if headings != list(PARTS):
        problems.append(f"{name}: sections {headings}, expected {list(PARTS)} in that order")
    return problems


def duplicate_numbers(names: Iterable[str]) -> list[str]:
    seen: dict[str, str] = {}
    duplicates = []
    for name in sorted(names):
        number = name[:4]
        if number in seen:
            duplicates.append(f"{seen[number]} and {name}")
        seen.setdefault(number, name)
    return duplicates


def pointers_to(doc: str, root: Path, dirs: Iterable[str], skip: Path) -> list[str]:
    """The ``.py`` files under ``dirs`` that mention ``doc``, relative to ``root``."""
    found = []
    for folder in dirs:
        for path in sorted((root / folder).rglob("*.py")):
            if path != skip and doc in path.read_text(encoding="utf-8"):
                found.append(path.relative_to(root).as_posix())
    return found


def unnamed_files(paths: Iterable[str], text: str) -> list[str]:
    """The paths ``text`` names neither in full nor, after another file of its folder in
    one cell, by file name alone (``gateway/server/protocol.py`, `cycle.py``)."""
    missing = []
    for path in paths:
        folder, _, name = path.rpartition("/")
        if f"`{path}`" in text:
            continue
        if re.search(rf"`{re.escape(folder)}/[^`]+`[^|\n]*`{re.escape(name)}`", text):
            continue
        missing.append(path)
    return missing


def _records() -> list[str]:
    return sorted(p.name for p in DECISIONS.iterdir() if p.is_file() and p.name != INDEX)


# The checks on the real tree


def test_architecture_names_every_gateway_package() -> None:
    found = packages(ROOT / "gateway")
    assert "stored" in found and "dialects/openai" in found  # the walk sees nested packages
    missing = unnamed_packages(found, ARCHITECTURE.read_text(encoding="utf-8"))
    assert not missing, f"docs/architecture.md does not name gateway/ packages: {missing}"


def test_every_decision_record_is_in_the_index() -> None:
    records = _records()
    assert records, "docs/decisions/ holds no records"
    index = (DECISIONS / INDEX).read_text(encoding="utf-8")
    missing = unindexed_records(records, index)
    assert not missing, f"docs/decisions/README.md does not list {missing}"
    dangling = broken_links(index, records)
    assert not dangling, f"docs/decisions/README.md links to missing records: {dangling}"


def test_decision_records_are_numbered_and_have_the_four_parts() -> None:
    records = _records()
    problems = [
        problem
        for name in records
        for problem in record_problems(name, (DECISIONS / name).read_text(encoding="utf-8"))
    ]
    assert not problems, "\n".join(problems)
    assert not duplicate_numbers(records), duplicate_numbers(records)


def test_code_pointing_to_performance_figures_is_named_there() -> None:
    pointing = pointers_to("docs/performance.md", ROOT, SOURCE_DIRS, Path(__file__).resolve())
    assert "gateway/server/process.py" in pointing  # the scan sees the code's pointers
    missing = unnamed_files(pointing, PERFORMANCE.read_text(encoding="utf-8"))
    assert not missing, f"docs/performance.md does not name {missing}, whose comments point to it"


# Each check, on input with one thing missing


def test_packages_finds_nested_packages_only(tmp_path: Path) -> None:
    for folder in ("pkg", "pkg/a", "pkg/a/b", "pkg/plain"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    for folder in ("pkg", "pkg/a", "pkg/a/b"):
        (tmp_path / folder / "__init__.py").write_text("")
    assert packages(tmp_path / "pkg") == ["a", "a/b"]


def test_unnamed_packages_reports_a_missing_one() -> None:
    text = "| `admin/` | ... | `gateway/dialects/openai/` ... restored/ and xstored/"
    assert unnamed_packages(["admin", "dialects/openai", "stored"], text) == ["stored"]
    assert unnamed_packages(["upstream/local"], "see (upstream/local/)") == []


def test_unindexed_records_and_broken_links() -> None:
    index = "| [0001](0001-a.md) | ... |\n| [0003](0003-c.md) | ... | [perf](../performance.md)"
    assert unindexed_records(["0001-a.md", "0002-b.md"], index) == ["0002-b.md"]
    assert broken_links(index, ["0001-a.md", "0002-b.md"]) == ["0003-c.md"]


def test_record_problems_finds_each_fault() -> None:
    good = "# 0007. A title\n\n## Context\n\n## Decision\n\n## Figures\n\n## Status\n"
    assert record_problems("0007-a-title.md", good) == []
    assert record_problems("7-a-title.md", good)  # not four digits
    assert record_problems("0007_a_title.md", good)  # underscores
    assert record_problems("0008-a-title.md", good)  # title number differs from the name
    assert record_problems("0007-a-title.md", good.replace("## Figures\n\n", ""))
    assert record_problems("0007-a-title.md", good.replace("## Status", "## Outcome"))
    assert duplicate_numbers(["0001-a.md", "0001-b.md", "0002-c.md"]) == ["0001-a.md and 0001-b.md"]


def test_pointers_and_unnamed_files(tmp_path: Path) -> None:
    (tmp_path / "gateway" / "server").mkdir(parents=True)
    (tmp_path / "gateway" / "server" / "protocol.py").write_text("# figures in docs/perf.md\n")
    (tmp_path / "gateway" / "server" / "cycle.py").write_text("# see docs/perf.md\n")
    (tmp_path / "gateway" / "app.py").write_text("# nothing\n")
    skip = tmp_path / "gateway" / "server" / "cycle.py"
    assert pointers_to("docs/perf.md", tmp_path, ["gateway"], skip) == [
        "gateway/server/protocol.py"
    ]
    text = "| `gateway/server/protocol.py`, `cycle.py` | ... |\n| `gateway/app.py` | ... |"
    paths = [
        "gateway/server/protocol.py",
        "gateway/server/cycle.py",
        "gateway/app.py",
        "gateway/keys/store.py",
    ]
    assert unnamed_files(paths, text) == ["gateway/keys/store.py"]
