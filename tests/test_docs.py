"""docs/ is the spec the code cites: every item id, docs file and section that code, profiles and
tests name is defined there, and no citation points outside the repository.

Ids. A docs file defines an id in the first cell of a table row (`| L7 | ...`): one or two capital
letters, a number of one or two digits, and for a few scenarios a suffix (`BR1-nonote`). A
citation is checked when it is a whole word (`\\b`), a number of one or two digits after one of
the letter groups the docs define (S U R L T A P N B BR today, read from the docs themselves), so
`L1-L3` checks L1 and L3, `field/BR1` and `BR1-racing` check BR1. Capitals and digits with other
letters (the impairment worker's queues `Q1 Q2`) are not ids, and neither is anything inside a
longer word (`0xA5`, base64, `T10ms`). An id that exists in docs/ passes wherever it is cited:
the test cannot tell a field scenario's R1 from the server behaviour's R1 (docs/README.md says how
citations tell them apart); it catches ids that docs/ does not define at all.

Files. A citation of a docs file is `docs/NAME.md`, and that file must exist; a docs file's bare
name (`field-scenarios.md`) reads as a file beside the citing one, so it is flagged, as is
anything that points outside the repository (`shared/`, `/work/`, a `../` path to a .md file).
A section `§8.10` resolves in the docs file the citing file named last before it: section 8 must
exist there, and item 10 of its numbered list.
"""

from __future__ import annotations

import re
from pathlib import Path

from faultlab.reference import WRITERS

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
# The pages faultlab.reference writes into the site at each build: no file in docs/.
GENERATED = {(DOCS / page).resolve() for page in WRITERS}
# What cites the spec: the code, both copies of the profiles, the tests, the bench, the README,
# the site's guide and tutorial, the build, and the recipes and profiles kept under docs/.
CITING = ["faultlab", "profiles", "tests", "bench", "containers", "docs/ci", "docs/real",
          "docs/guide", "docs/tutorial", "README.md", "Makefile"]
TEXT_SUFFIXES = {".py", ".yaml", ".yml", ".md", ".toml", ".sh", ".cfg", ".txt", ".html", ".js",
                 ".mjs", ".css", ".j2", ""}
# Folders of what others wrote or a build made: the JavaScript clients' packages and bundle.
NOT_CITING = {"__pycache__", "node_modules", "dist"}

DEFINITION = re.compile(r"^\|\s*([A-Z]{1,2})(\d{1,2})(-[a-z-]+)?\s*\|", re.MULTILINE)
DOCS_CITATION = re.compile(r"(?<![\w/.-])docs/([\w.-]+\.md)\b")
BARE_NAME = re.compile(r"(?<![\w/.-])([\w.-]+\.md)\b")
OUTSIDE = re.compile(r"(?<![\w.-])(?:shared/|/work/)|\.\./\S*\.md\b")
SECTION = re.compile(r"§(\d+)(?:\.(\d+))?")


def docs_files() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(DOCS.glob("*.md"))}


def defined_ids() -> dict[str, list[str]]:
    """Each id, with the docs files that define it."""
    where: dict[str, list[str]] = {}
    for name, text in docs_files().items():
        for letters, number, suffix in DEFINITION.findall(text):
            where.setdefault(f"{letters}{number}{suffix}", []).append(name)
    return where


def citation_pattern() -> re.Pattern[str]:
    groups = {re.sub(r"\d.*", "", i) for i in defined_ids()}
    alternatives = "|".join(sorted(groups, key=lambda g: (-len(g), g)))
    return re.compile(rf"\b(?:{alternatives})\d{{1,2}}\b")


def citing_files() -> list[Path]:
    files: list[Path] = []
    for entry in CITING:
        path = REPO / entry
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        files += [f for f in candidates
                  if f.is_file() and f.suffix in TEXT_SUFFIXES and not NOT_CITING & set(f.parts)
                  and f != Path(__file__).resolve()]
    return files


def lines_of(path: Path) -> list[tuple[str, str]]:
    """(`file:line`, the line) for every line of a citing file."""
    rel = path.relative_to(REPO)
    text = path.read_text(errors="replace")
    return [(f"{rel}:{n}", line) for n, line in enumerate(text.splitlines(), 1)]


def in_docs(path: Path, link: str) -> bool:
    """A site page's link to another page of docs/ (`../design.md` from docs/guide/), which
    stays in the repo; a reference page faultlab.reference writes into the site at each build
    (`../reference/faults.md#drop`) is such a page too."""
    target = (path.parent / link).resolve()
    return path.is_relative_to(DOCS) and target.is_relative_to(DOCS) and (
        target.is_file() or target in GENERATED)


def section_exists(doc: str, section: str, item: str | None) -> bool:
    """`## N.` is a heading of `doc`, and when `item` is given, `M.` starts a line of its list."""
    parts = re.split(r"^## ", doc, flags=re.MULTILINE)
    body = next((p for p in parts if p.startswith(f"{section}. ")), None)
    if body is None:
        return False
    return item is None or re.search(rf"^{item}\. ", body, re.MULTILINE) is not None


def test_docs_define_each_id_once_per_file() -> None:
    """An id appears as a definition at most once in a file, so a citation has one meaning there."""
    for name, text in docs_files().items():
        ids = ["".join(m) for m in DEFINITION.findall(text)]
        assert len(ids) == len(set(ids)), (name, sorted(i for i in ids if ids.count(i) > 1))


def test_every_cited_item_id_is_defined_in_docs() -> None:
    """Code, profiles and tests cite only item ids that a docs file defines."""
    ids = defined_ids()
    pattern = citation_pattern()
    unknown = [f"{where}: {m}" for path in citing_files() for where, line in lines_of(path)
               for m in pattern.findall(line) if m not in ids]
    assert not unknown, "item ids docs/ does not define:\n" + "\n".join(unknown)


def test_citations_name_docs_files_that_exist_and_stay_in_the_repo() -> None:
    """A docs file is cited as docs/NAME.md and exists; nothing cites a file outside the repo."""
    names = set(docs_files()) - {"README.md"}
    problems = []
    for path in citing_files():
        for where, line in lines_of(path):
            problems += [f"{where}: docs/{n} does not exist" for n in DOCS_CITATION.findall(line)
                         if not (DOCS / n).is_file()]
            problems += [f"{where}: {n} without docs/" for n in BARE_NAME.findall(line)
                         if n in names]
            problems += [f"{where}: points outside the repo: {m.group(0)}"
                         for m in OUTSIDE.finditer(line) if not in_docs(path, m.group(0))]
    assert not problems, "\n".join(problems)


def test_cited_sections_exist_in_the_docs_file_cited_before_them() -> None:
    """`§8.10` names a section (and an item of its list) of the docs file cited last before it."""
    docs = docs_files()
    problems = []
    for path in citing_files():
        cited: str | None = None
        for where, line in lines_of(path):
            for m in re.finditer(rf"{DOCS_CITATION.pattern}|{SECTION.pattern}", line):
                if m.group(1):
                    cited = m.group(1)
                elif cited is None or cited not in docs:
                    problems.append(f"{where}: {m.group(0)} with no docs file cited before it")
                elif not section_exists(docs[cited], m.group(2), m.group(3)):
                    problems.append(f"{where}: {m.group(0)} is not in docs/{cited}")
    assert not problems, "\n".join(problems)


def test_each_field_scenario_has_its_profile_and_each_field_profile_its_scenario() -> None:
    """profiles/field/ID.yaml replays field scenario ID; the others vary one and say which."""
    text = (DOCS / "field-scenarios.md").read_text()
    scenarios = {"".join(m) for m in DEFINITION.findall(text)}
    profiles = {p.stem for p in (REPO / "profiles" / "field").glob("*.yaml")}
    assert scenarios <= profiles, sorted(scenarios - profiles)
    for variant in sorted(profiles - scenarios):
        assert variant.split("-")[0] in scenarios, variant
        assert f"`{variant}`" in text, f"{variant} is not described in docs/field-scenarios.md"


def test_the_readmes_index_the_docs() -> None:
    """docs/README.md links every docs file, and the repository's README links docs/README.md."""
    index = (DOCS / "README.md").read_text()
    for name in set(docs_files()) - {"README.md"}:
        assert f"]({name})" in index, name
    assert "](docs/README.md)" in (REPO / "README.md").read_text()
