"""The documents and the code speak to users: no internal issue numbers."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_internal_issue_numbers():
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md"),
             *(ROOT / "attnbench").rglob("*.py"), *(ROOT / "tools").glob("*.*")]
    found = [f"{path.relative_to(ROOT)}:{number}" for path in files
             for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             if re.search(r"\bissues? #?\d+", line, re.IGNORECASE)]
    assert not found, f"internal issue numbers in {found}"


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a document's headings: lowercased, punctuation dropped, spaces as
    hyphens, a repeated anchor suffixed -1, -2, ..."""
    anchors, seen = set(), {}
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        heading = not in_code and re.match(r"#{1,6} (.+)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(f"{slug}-{count}" if count else slug)
    return anchors


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
