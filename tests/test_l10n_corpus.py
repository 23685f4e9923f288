"""The l10n corpus builder on catalogues and packages the test writes itself (no network)."""
import json
import os
import shutil
import subprocess

import polib
import pytest

from attnbench.data import l10n_corpus
from attnbench.data.l10n_corpus import (CorpusUnavailable, Limits, build_corpus, clean_pair, drop_reason,
                                        placeholders, split_key, split_of)


@pytest.mark.parametrize("pair, cleaned", [
    (("_Open", "Ö_ffnen"), ("Open", "Öffnen")),                       # GTK mnemonics
    (("Op_en", "Ö_ffnen"), ("Open", "Öffnen")),                       # inside a word
    (("&Save As...", "Speichern &unter ..."), ("Save As...", "Speichern unter ...")),  # Qt
    (("~Insert", "~Einfügen"), ("Insert", "Einfügen")),               # LibreOffice
    (("Export to &Facebook", "Export zu &Facebook"), ("Export to Facebook", "Export zu Facebook")),
    (("set file_name", "file_name setzen"), ("set file_name", "file_name setzen")),  # an identifier
    (("AT&T syntax", "AT&T-Syntax"), ("AT&T syntax", "AT&T-Syntax")),
    (("set _NET_WM_NAME", "_NET_WM_NAME setzen"), ("set _NET_WM_NAME", "_NET_WM_NAME setzen")),
    (("<b>Bold</b> &amp; more", "<b>Fett</b> &amp; mehr"), ("Bold & more", "Fett & mehr")),
    (("Line\none\ttwo ", " Zeile\n eins\tzwei"), ("Line one two", "Zeile eins zwei")),
    (("usage: cmd <file>", "Aufruf: cmd <Datei>"), ("usage: cmd <file>", "Aufruf: cmd <Datei>")),  # not a tag
    (("Copy %s to %s", "%s nach %s kopieren"), ("Copy %s to %s", "%s nach %s kopieren")),
])
def test_clean_pair(pair, cleaned):
    assert clean_pair(*pair) == cleaned


def test_placeholders_are_kept_and_compared():
    assert placeholders("%1$s of %2$d, {0} and {name}: $HOME ${DIR} $(ARG) %1 %PRODUCTNAME %qs %<x%> 100%%") \
        == placeholders("%2$d von %1$s, {name} und {0}: %PRODUCTNAME $(ARG) ${DIR} %1 $HOME %<x%> %qs 100%%")
    limits = Limits()
    assert drop_reason("Copy %s to %d", "%d nach %s kopieren", limits) is None  # order may change
    assert drop_reason("Copy %s to %s", "%s kopieren", limits) == "placeholders"
    assert drop_reason("Open {0}", "Öffne {1}", limits) == "placeholders"


@pytest.mark.parametrize("pair, reason", [
    (("%s: %d", "%s: %d"), "no_letters"),
    (("OK", "OK"), "copied"),
    (("A", "B"), "length"),                                  # shorter than min_chars
    (("x" * 201, "y" * 150), "length"),
    (("Short text here", "Ein sehr viel längerer deutscher Text, viel zu lang"), "ratio"),
    (("Open file", "Datei öffnen"), None),
])
def test_drop_reason(pair, reason):
    assert drop_reason(*pair, Limits()) == reason


def test_split_rule_follows_the_english():
    assert split_key("  Open…") == split_key("open:") == split_key("OPEN")
    assert len({split_of(text, 0.3, 0.3) for text in ("Open", "open...", " OPEN:")}) == 1
    splits = [split_of(f"message number {i}", 0.1, 0.2) for i in range(4000)]
    assert 300 < splits.count("valid") < 500 and 650 < splits.count("test") < 950  # 400 and 800 expected


def write_catalogue(path, entries, mo=False):
    """A German catalogue of ``entries`` (msgid, msgstr, options) as .po, or compiled to .mo."""
    catalogue = polib.POFile()
    catalogue.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Language": "de"}
    for msgid, msgstr, options in entries:
        catalogue.append(polib.POEntry(msgid=msgid, msgstr=msgstr, **options))
    path.parent.mkdir(parents=True, exist_ok=True)
    catalogue.save_as_mofile(str(path)) if mo else catalogue.save(str(path))


ALPHA = [  # 6 entries in a .po: 3 kept, 1 plural, 1 fuzzy, 1 empty
    ("_Open file", "Datei ö_ffnen", {}),
    ("Save the document", "Dokument speichern", {}),
    ("Copy %s to %s", "%s nach %s kopieren", {"flags": ["c-format"]}),
    ("%d file", "", {"msgid_plural": "%d files", "msgstr_plural": {0: "%d Datei", 1: "%d Dateien"}}),
    ("Close window", "Fenster schließen", {"flags": ["fuzzy"]}),
    ("Quit", "", {}),
]
BETA = [  # 5 entries in a .mo (which holds translated entries only): 2 kept, 1 duplicate of alpha's, 1 copied, 1 placeholder mismatch
    ("Open file", "Datei öffnen", {}),
    ("Print page", "Seite drucken", {}),
    ("Print %s pages", "Seiten drucken", {}),
    ("Linux", "Linux", {}),
    ("Delete <b>all</b> lines", "<b>Alle</b> Zeilen löschen", {}),
]


def make_deb(folder, name, version, files, licence="GPL-2+"):
    """A Debian package ``name`` holding ``files`` (path -> writer) and a machine-readable copyright file."""
    root = folder / f"{name}-build"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: Test <test@example.org>\n"
        f"Description: test package\n")
    doc = root / "usr" / "share" / "doc" / name
    doc.mkdir(parents=True)
    (doc / "copyright").write_text(f"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
                                   f"Files: *\nCopyright: Test\nLicense: {licence}\n")
    for path, write in files.items():
        write(root / path)
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(folder / f"{name}_{version}_all.deb")],
                   check=True, capture_output=True)
    shutil.rmtree(root)


@pytest.fixture
def debs(tmp_path):
    if shutil.which("dpkg-deb") is None:
        pytest.skip("dpkg-deb is not on this machine")
    folder = tmp_path / "debs"
    folder.mkdir()
    make_deb(folder, "alpha", "1.0-1", {
        "usr/share/alpha/po/de.po": lambda p: write_catalogue(p, ALPHA),
        "usr/share/alpha/po/fr.po": lambda p: write_catalogue(p, [("Open", "Ouvrir", {})]),
    })
    make_deb(folder, "beta", "2:3.1-2", {
        "usr/share/locale/de/LC_MESSAGES/beta.mo": lambda p: write_catalogue(p, BETA, mo=True)},
             licence="LGPL-2.1+")
    (tmp_path / "packages.txt").write_text("# test list\nalpha 1.0-1\nbeta 2:3.1-2  # a comment\n")
    return folder


def test_build_corpus_from_packages(debs, tmp_path):
    out = build_corpus(tmp_path / "corpus", packages=tmp_path / "packages.txt", debs=debs,
                       valid_fraction=0.3, test_fraction=0.3, log=lambda line: None)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["entries"] == 11  # the French catalogue is not read
    assert manifest["dropped"] == dict(plural=1, fuzzy=1, obsolete=0, empty=1, no_letters=0, copied=1,
                                       placeholders=1, length=0, ratio=0, duplicate=1)
    assert sum(manifest["pairs"].values()) == 5
    alpha, beta = manifest["packages"]
    assert (alpha["name"], alpha["version"], alpha["catalogues"], alpha["kept"]) == ("alpha", "1.0-1", 1, 3)
    assert (beta["version"], beta["licences"], beta["kept"]) == ("2:3.1-2", ["LGPL-2.1+"], 2)
    lines = {split: list(zip(*((out / f"{split}.{side}").read_text().splitlines() for side in ("en", "de"))))
             for split in ("train", "valid", "test")}
    assert sorted(pair for rows in lines.values() for pair in rows) == sorted([
        ("Open file", "Datei öffnen"), ("Save the document", "Dokument speichern"),
        ("Copy %s to %s", "%s nach %s kopieren"), ("Print page", "Seite drucken"),
        ("Delete all lines", "Alle Zeilen löschen")])
    for split, rows in lines.items():
        assert all(split_of(source, 0.3, 0.3) == split for source, _ in rows)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("corpus.tmp")] == []


def test_obsolete_entries_are_dropped(tmp_path):
    path = tmp_path / "de.po"
    write_catalogue(path, [("Old text", "Alter Text", {"obsolete": True}), ("New text", "Neuer Text", {})])
    assert sorted(l10n_corpus.catalogue_entries(path), key=str) == [("New text", "Neuer Text"), "obsolete"]


def test_nothing_half_written(debs, tmp_path):
    (tmp_path / "packages.txt").write_text("alpha 1.0-1\nmissing 1.0\n")
    with pytest.raises(CorpusUnavailable, match="no missing_"):
        build_corpus(tmp_path / "corpus", packages=tmp_path / "packages.txt", debs=debs, log=lambda line: None)
    assert not any(p.name.startswith("corpus") for p in tmp_path.iterdir())


def test_a_version_other_than_the_pinned_one_is_refused_unless_asked_for(debs, tmp_path):
    (tmp_path / "packages.txt").write_text("alpha 1.0-2\n")
    with pytest.raises(CorpusUnavailable, match="alpha_.*pinned version 1.0-2.*holds 1.0-1; --any-version"):
        build_corpus(tmp_path / "corpus", packages=tmp_path / "packages.txt", debs=debs, log=lambda line: None)
    out = build_corpus(tmp_path / "corpus", packages=tmp_path / "packages.txt", debs=debs, any_version=True,
                       log=lambda line: None)
    alpha, = json.loads((out / "manifest.json").read_text())["packages"]
    assert (alpha["pinned"], alpha["version"]) == ("1.0-2", "1.0-1")


def test_apt_lists_without_the_pinned_version_stop_the_build(debs, tmp_path, monkeypatch):
    """A fake apt-get that serves alpha at 1.0-1 only (as apt with lists older or newer than the pin)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "apt-get").write_text(f"""#!/bin/sh
case "$3" in alpha|alpha=1.0-1) cp {debs}/alpha_1.0-1_all.deb . ;; *) echo "E: Version '${{3#*=}}' for 'alpha' was not found" >&2; exit 100 ;; esac
""")
    (fake / "apt-get").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    (tmp_path / "packages.txt").write_text("alpha 1.0-2\n")
    options = dict(packages=tmp_path / "packages.txt", cache=tmp_path / "cache", log=lambda line: None)
    with pytest.raises(CorpusUnavailable, match=r"alpha=1.0-2 failed \(E: Version '1.0-2'.*apt-get update"):
        build_corpus(tmp_path / "corpus", **options)
    assert not (tmp_path / "corpus").exists()
    lines = []
    out = build_corpus(tmp_path / "corpus", **options | dict(any_version=True, log=lines.append))
    assert lines[-3] == "alpha 1.0-2 is not in apt's lists: using 1.0-1 (--any-version)"
    assert json.loads((out / "manifest.json").read_text())["packages"][0]["version"] == "1.0-1"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root refreshes apt's lists")
def test_stale_apt_lists_are_refreshed_once_and_a_version_gone_from_the_archive_says_so(debs, tmp_path, monkeypatch):
    """A fake apt-get whose lists know alpha 1.0-1 only after ``apt-get update`` (stale lists), and never beta's
    pinned version (gone from the archive)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "apt-get").write_text(f"""#!/bin/sh
echo "$@" >> {tmp_path}/calls
case "$1 $3" in
  "update "*) touch {tmp_path}/updated ;;
  "download alpha=1.0-1") [ -e {tmp_path}/updated ] && cp {debs}/alpha_1.0-1_all.deb . && exit 0; exit 100 ;;
  *) echo "E: Version not found" >&2; exit 100 ;;
esac
""")
    (fake / "apt-get").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    (tmp_path / "packages.txt").write_text("alpha 1.0-1\n")
    lines = []
    build_corpus(tmp_path / "corpus", packages=tmp_path / "packages.txt", cache=tmp_path / "cache", log=lines.append)
    assert lines[0] == "apt-get download alpha=1.0-1 failed: refreshing apt's package lists (apt-get update) once"
    (tmp_path / "packages.txt").write_text("beta 9.9-9\n")
    with pytest.raises(CorpusUnavailable, match="refreshed and still lack it: the archive no longer serves it.*"
                                                "--any-version"):
        build_corpus(tmp_path / "gone", packages=tmp_path / "packages.txt", cache=tmp_path / "cache",
                     log=lambda line: None)
    assert (tmp_path / "calls").read_text().count("update") == 2  # once a build


def test_without_apt_one_line_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(l10n_corpus.shutil, "which", lambda tool: None if tool == "apt-get" else f"/usr/bin/{tool}")
    with pytest.raises(CorpusUnavailable, match="no apt-get on this machine.*your own parallel files"):
        build_corpus(tmp_path / "corpus", log=lambda line: None)
    assert not (tmp_path / "corpus").exists()


def test_pinned_list_parses():
    pins = l10n_corpus.read_pins()
    assert len(pins) >= 50 and len({name for name, _ in pins}) == len(pins)


def test_the_task_reads_parallel_text_of_your_own_and_builds_only_into_an_empty_folder(tmp_path, monkeypatch):
    from attnbench.data.translation import L10nCorpusDataset

    built = []
    monkeypatch.setattr(l10n_corpus, "build_corpus", lambda root, **options: built.append(root))
    own = tmp_path / "own"
    own.mkdir()
    (own / "train.en").write_text("Open file\n")
    L10nCorpusDataset.generate_data(str(own))
    assert built == []
    L10nCorpusDataset.generate_data(str(tmp_path / "empty"), dict(lang="de"))
    assert built == [str(tmp_path / "empty")]


def test_the_heldout_split_reads_other_packages_and_keeps_no_english_string_of_train(debs, tmp_path):
    make_deb(debs, "gamma", "0.9-1", {"usr/share/locale/de/LC_MESSAGES/gamma.mo": lambda p: write_catalogue(p, [
        ("Print page", "Seite drucken", {}),      # beta's English: in train (all of it, at valid/test 0.01)
        ("print page:", "Seite drucken:", {}),     # the same split key: dropped too
        ("Burn the disc", "Die Disk brennen", {}),
        ("Burn the disc", "Die Disk brennen", {}),  # a duplicate within the held-out packages
        ("Erase the disc", "Die Disk löschen", {})], mo=True)})
    (tmp_path / "heldout.txt").write_text("gamma 0.9-1\n")
    out = build_corpus(tmp_path / "corpus", packages=tmp_path / "packages.txt", heldout_packages=tmp_path / "heldout.txt",
                       debs=debs, valid_fraction=0.01, test_fraction=0.01, log=lambda line: None)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["pairs"]["heldout"] == 2 and manifest["heldout"]["dropped"]["in_train"] == 2
    assert manifest["heldout"]["dropped"]["duplicate"] == 1
    assert [r["name"] for r in manifest["heldout"]["packages"]] == ["gamma"]
    assert (out / "heldout.en").read_text() == "Burn the disc\nErase the disc\n"
    train = set((out / "train.en").read_text().splitlines())
    assert train and not train & set((out / "heldout.en").read_text().splitlines())
    assert set(manifest["files"]) == {f"{s}.{side}" for s in ("train", "valid", "test", "heldout") for side in ("en", "de")}
    assert manifest["corpus"] == l10n_corpus.corpus_digest(manifest["files"])
    assert "| gamma | 0.9-1 | heldout | GPL-2+ |" in (out / "NOTICE.md").read_text()
    (tmp_path / "heldout.txt").write_text("alpha 1.0-1\n")
    with pytest.raises(ValueError, match="held-out packages must not be in the corpus's list; alpha"):
        build_corpus(tmp_path / "again", packages=tmp_path / "packages.txt", heldout_packages=tmp_path / "heldout.txt",
                     debs=debs, log=lambda line: None)


def test_a_packed_corpus_unpacks_checked_and_a_rebuild_says_what_differs(debs, tmp_path):
    out = build_corpus(tmp_path / "corpus", packages=tmp_path / "packages.txt", debs=debs,
                       valid_fraction=0.3, test_fraction=0.3, log=lambda line: None)
    archive = l10n_corpus.pack_corpus(out, tmp_path / "corpus.tar.xz")
    assert l10n_corpus.pack_corpus(out, tmp_path / "again.tar.xz").read_bytes() == archive.read_bytes()
    assert l10n_corpus.committed_manifest(archive)["corpus"] == json.loads((out / "manifest.json").read_text())["corpus"]
    unpacked = l10n_corpus.unpack_committed(tmp_path / "data" / "l10n", archive, log=lambda line: None)
    assert all((unpacked / name).read_bytes() == (out / name).read_bytes() for name in ("train.en", "valid.de"))
    assert l10n_corpus.corpus_of(unpacked) == l10n_corpus.corpus_of(out) != ""
    assert l10n_corpus.compare_with_committed(out, archive) == []
    (tmp_path / "packages.txt").write_text("alpha 1.0-1\n")
    other = build_corpus(tmp_path / "other", packages=tmp_path / "packages.txt", debs=debs,
                         valid_fraction=0.3, test_fraction=0.3, log=lambda line: None)
    differences = l10n_corpus.compare_with_committed(other, archive)
    assert differences and all(line.split(":")[1].startswith(" differs (") for line in differences)


def test_the_committed_corpus_is_the_pinned_lists_and_unpacks_for_the_task(tmp_path):
    manifest = l10n_corpus.committed_manifest()
    assert [(r["name"], r["pinned"]) for r in manifest["packages"]] == l10n_corpus.read_pins()
    assert [(r["name"], r["pinned"]) for r in manifest["heldout"]["packages"]] == \
        l10n_corpus.read_pins(l10n_corpus.HELDOUT_PACKAGES_FILE)
    assert manifest["pairs"] == dict(train=196705, valid=4035, test=4025, heldout=5659)
    from attnbench.data.translation import L10nCorpusDataset

    L10nCorpusDataset.generate_data(str(tmp_path / "l10n"))
    assert l10n_corpus.corpus_of(tmp_path / "l10n") == manifest["corpus"]
    notice = (l10n_corpus.COMMITTED_CORPUS.parent / "l10n-ende.NOTICE.md").read_text()
    assert notice == (tmp_path / "l10n" / "NOTICE.md").read_text()
