"""The documents and the code speak to users: no internal issue numbers."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_internal_issue_numbers():
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md"),
             *(ROOT / "attnbench").rglob("*.py"), *(ROOT / "tools").glob("*.*")]
    found = [f"{path.relative_to(ROOT)}:{number}" for path in files
             for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             if re.search(r"\bissues? #?\d+", line, re.IGNORECASE)]
    assert not found, f"internal issue numbers in {found}"


def headings(markdown: str) -> list[tuple[int, str]]:
    """(level, anchor) of a document's headings in order, their anchors as GitHub gives them: lowercased,
    punctuation dropped, spaces as hyphens, a repeated anchor suffixed -1, -2, ..."""
    found, seen = [], {}
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        heading = not in_code and re.match(r"(#{1,6}) (.+)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading[2].strip().lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.append((len(heading[1]), f"{slug}-{count}" if count else slug))
    return found


def heading_anchors(markdown: str) -> set[str]:
    return {anchor for _, anchor in headings(markdown)}


def test_heading_anchors_follow_github():
    text = "# The study\n## Under the paired protocol (`results/mini-study/`)\n## E1's score\n## E1's score\n"
    assert heading_anchors(text) == {"the-study", "under-the-paired-protocol-resultsmini-study", "e1s-score",
                                     "e1s-score-1"}


def test_relative_links_resolve():
    """Every relative link of README.md, CONTRIBUTING.md and docs/ names a file that exists, and its
    #anchor, if any, a heading of that file."""
    broken = []
    for page in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked.read_text()):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_openmmlab_md_names_every_full_scale_detection_config():
    """docs/openmmlab.md lists the ``{variant}`` of each generated full-scale config: a mechanism added to the
    table (and its configs generated) is named there too."""
    listed = set(re.findall(r"`([\w-]+)`", (ROOT / "docs" / "openmmlab.md").read_text()))
    slugs = {re.fullmatch(r"faster-rcnn_r50-(.+)_fpn_1x_coco\.py", path.name)[1]
             for path in (ROOT / "configs" / "detection").glob("faster-rcnn_r50-*_fpn_1x_coco.py")}
    named = {slug for slug in slugs if slug in listed or re.fullmatch(r"attn\d{4}", slug)}
    assert slugs and named == slugs, f"not in docs/openmmlab.md: {sorted(slugs - named)}"


def test_each_contents_list_matches_its_pages_headings():
    """A page's ``Contents:`` list links its headings, in order, to the depth the list goes (## alone, or ## and
    ###): a section added or renamed is listed too."""
    for path in sorted((ROOT / "docs").glob("*.md")):
        text = path.read_text()
        if "\nContents:\n" not in text:
            continue
        contents = text.split("\nContents:\n", 1)[1].lstrip("\n").split("\n\n", 1)[0]
        listed = [(len(indent) // 2, anchor) for indent, anchor in re.findall(r"^( *)- \[.*\]\(#([^)]+)\)$", contents,
                                                                              re.MULTILINE)]
        depth = max(level for level, _ in listed)
        sections = [(level - 2, anchor) for level, anchor in headings(text) if 2 <= level <= depth + 2]
        assert listed == sections, f"{path.name}: contents {listed} but headings {sections}"


def test_the_fresh_clone_check_runs_the_quick_start_and_ci_its_test_command():
    """tools/fresh_clone_check.sh runs the README's Quick start lines (the README's times quote its records),
    and .ci/run ends with the second, the test command."""
    listed = subprocess.run(["bash", "tools/fresh_clone_check.sh", "--list"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    quick_start = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("```bash\n", 1)[1]
    assert listed == [line for line in quick_start.split("\n```", 1)[0].splitlines() if line.strip()]
    assert len(listed) == 2 and "tools/sweep.py" in listed[0] and "-m pytest" in listed[1]
    ci = (ROOT / ".ci/run").read_text().strip().splitlines()[-1]
    assert ci == listed[1].split("#")[0].strip()


def prose_lines(markdown: str) -> list[tuple[int, str]]:
    """(line number, line) of a page's lines outside fenced code blocks (the fences themselves left out)."""
    found, in_code = [], False
    for number, line in enumerate(markdown.splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code:
            found.append((number, line))
    return found


README_MAX_LINES = 150
README_MAX_WIDTH = 120


def test_readme_is_short_and_reads_in_raw_markdown():
    """The README stays a short read: at most 150 lines, and no line outside a code block wider than 120
    characters (a wide table belongs in docs/, split or wrapped)."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES, f"README.md has {len(text.splitlines())} lines"
    wide = [f"line {number}: {len(line)} characters" for number, line in prose_lines(text)
            if len(line) > README_MAX_WIDTH]
    assert not wide, f"README.md lines over {README_MAX_WIDTH} characters outside code blocks: {wide}"


def test_prose_lines_leave_out_code_blocks():
    text = "a\n```bash\n" + "x" * 200 + "\n```\nb\n"
    assert prose_lines(text) == [(1, "a"), (5, "b")]


#: The README's jargon: each has an entry in docs/glossary.md (a heading or a **bold** term there).
README_JARGON = (
    "E1", "E2", "E3", "E4", "factor string", "row", "run", "seed", "mechanism", "gate", "gates open", "protocol",
    "slot", "preset", "mini preset", "small preset", "the survey", "generated scenes", "synthetic corpus",
    "held-out packages", "results store", "store", "paired", "claim", "contrast", "family", "Holm", "verdict",
    "registered", "registration", "lead", "would detect", "bbox mAP", "mIoU", "BLEU", "chrF", "copy score",
    "below copying", "context accuracy", "learnt", "MACs", "GMACs", "published AP",
)


def glossary_terms(markdown: str) -> set[str]:
    """The terms a glossary defines: its headings and its **bold** words, lowercased."""
    bold = re.findall(r"\*\*([^*]+)\*\*", markdown)
    return {term.strip().lower() for term in [*bold, *(heading for _, heading in
                                                         re.findall(r"^(#{1,6}) (.+)$", markdown, re.MULTILINE))]}


def test_the_glossary_defines_the_readmes_jargon():
    terms = glossary_terms((ROOT / "docs" / "glossary.md").read_text())
    missing = [word for word in README_JARGON if word.lower() not in terms and f"{word.lower()}s" not in terms]
    assert not missing, f"docs/glossary.md has no entry (a heading or a **bold** term) for {missing}"
    assert "docs/glossary.md" in (ROOT / "README.md").read_text(), "the README links to its glossary"
