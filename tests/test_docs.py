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
