"""Real English-German parallel text from Debian's translation catalogues (gettext ``.mo``/``.po``).

Debian's packages ship their user-interface messages and each language's translations as gettext
catalogues: an English ``msgid`` and its translated ``msgstr``. :func:`build_corpus` turns the German
catalogues of a pinned list of packages (``l10n_packages.txt`` beside this file) into
``train/valid/test.{en,de}`` and ``manifest.json``:

1. **fetch**: ``apt-get download NAME=VERSION`` into a cache (a version the archive no longer serves is
   replaced by its current one; the manifest records both), or ``.deb`` files from a folder;
2. **read**: every ``.mo``/``.po`` under a ``de`` folder (or named ``de.mo``/``de.po``) of each package,
   entries in file order; plural entries, fuzzy, obsolete and untranslated (empty) ones are dropped;
3. **clean** (:func:`clean_pair`): markup tags removed, accelerator marks (``_``, ``&``, ``~``) removed
   where the marked word is not in the other side as it is (an identifier such as ``file_name`` is),
   entities unescaped, whitespace collapsed; format placeholders (``%s``, ``%1$d``, ``{0}``, ``$VAR``,
   ``%1``) kept as they are, and a pair whose two sides' placeholders differ dropped; pairs copied
   untranslated, without letters, outside the length limits or of implausible length ratio dropped;
4. **deduplicate** exact pairs and **split** by a hash of the normalised English (:func:`split_of`), so
   one English string, from whichever package, lands in one split only;
5. **held out**: the catalogues of a second list of packages (``l10n_heldout_packages.txt``: applications
   none of whose catalogues is in the corpus), read and cleaned alike, deduplicated, and without any pair
   whose English (by the split key) is in train, as ``heldout.{en,de}``: text of applications the model has
   never seen.

The manifest records each file's SHA-256 and, over the six train/valid/test files, the corpus's
(:func:`corpus_digest`), which runs on the corpus record; the corpus built from the pinned lists is
committed (``corpora/l10n-ende.tar.xz``, :func:`unpack_committed`), and a rebuild is compared with it
(:func:`compare_with_committed`). The corpus is written into a temporary folder beside ``out`` and renamed at the end: a folder with a
``manifest.json`` is finished. Nothing here imports torch.
"""
from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

PACKAGES_FILE = Path(__file__).with_name("l10n_packages.txt")
HELDOUT_PACKAGES_FILE = Path(__file__).with_name("l10n_heldout_packages.txt")
#: the corpus built from the pinned lists, as committed: its files (manifest.json first) in one xz tarball
COMMITTED_CORPUS = Path(__file__).with_name("corpora") / "l10n-ende.tar.xz"
FORMAT_VERSION = 2
SPLITS = ("train", "valid", "test")
HELDOUT = "heldout"
#: why a catalogue entry is not in the corpus, in the order the checks run (``in_train``: held-out text only)
DROP_REASONS = ("plural", "fuzzy", "obsolete", "empty", "no_letters", "copied", "placeholders", "length",
                "ratio", "duplicate", "in_train")

#: HTML/XML tags that user-interface strings carry (GTK/Pango, Qt rich text, LibreOffice help)
_TAG = re.compile(r"</?(?:a|b|i|u|s|p|br|hr|em|strong|big|small|tt|span|sub|sup|code|kbd|pre|qt|html|body|"
                  r"nobr|ul|ol|li|h[1-6]|font|div|center|table|tr|td|th|img|link|emph|item|menuitem)"
                  r"(?:\s[^<>]*)?/?>", re.IGNORECASE)
_ENTITY = r"&(?:[a-zA-Z]+|#\d+|#x[0-9a-fA-F]+);"
#: printf (C, Python ``%(name)s``, gcc's ``%qs``, ``%<``/``%>``), Qt ``%1``/``%L1``, LibreOffice
#: ``%PRODUCTNAME``, Python/ICU ``{0}``/``{name}``, shell ``$VAR``/``${VAR}``/``$(VAR)``
_PLACEHOLDER = re.compile(
    r"%(?:\d+\$)?\([A-Za-z_]\w*\)[-+ 0#]*\d*(?:\.\d+)?[a-zA-Z]"
    r"|%(?:\d+\$)?[-+ 0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t|I64|I32|w)*[diouxXeEfFgGaAcspnqDO]"
    r"|%[<>']|%L?\d+|%[A-Z][A-Z0-9_]+"
    r"|\{[A-Za-z0-9_]*(?:[:!][^{}]*)?\}"
    r"|\$\{[A-Za-z_]\w*\}|\$\([A-Za-z_]\w*\)|\$[A-Za-z_]\w*")
_POSITION = re.compile(r"^%\d+\$")
_WORD = re.compile(r"[\w&~]+")
_ACCELERATOR = re.compile(r"(?<![_&~])[_&~](?=[^\W_])")  # a mark before a letter or digit, not doubled
_MARKED_WORD = re.compile(r"[_&~][^\W_][^_&~]*$")  # _File, &Y: a mark, then a word without another
_LETTER = re.compile(r"[^\W\d_]")
_SPACE = re.compile(r"\s+")
_EDGE_PUNCTUATION = re.compile(r"^[\W_]+|[\W_]+$")


class CorpusUnavailable(RuntimeError):
    """The catalogues cannot be had here (no ``apt-get``/``dpkg-deb``, no archive): one line saying so."""


@dataclass(frozen=True)
class Limits:
    """Length limits of a kept pair: characters per side, and the longer side over the shorter."""

    min_chars: int = 2
    max_chars: int = 200
    max_ratio: float = 3.0
    ratio_from_chars: int = 20  # the ratio applies once the longer side has this many characters


@dataclass
class PackageRecord:
    """What one package gave: its versions, licences, catalogues and entries."""

    name: str
    pinned: str
    version: str = ""
    sha256: str = ""
    licences: list[str] = field(default_factory=list)
    catalogues: int = 0
    entries: int = 0
    kept: int = 0


# -- cleaning --------------------------------------------------------------------------------------------

def placeholders(text: str) -> Counter:
    """Multiset of the format placeholders in ``text``, positions dropped (``%2$s`` counts as ``%s``)."""
    return Counter(_POSITION.sub("%", token) for token in _PLACEHOLDER.findall(text.replace("%%", "")))


def _strip_accelerators(text: str, other: str) -> str:
    """``text`` without accelerator marks: ``_``, ``&`` or ``~`` before a letter or digit that starts a word
    (``_File``, ``&Y``), or inside a word that ``other`` does not hold as it is (``Op_en``/``Ö_ffnen``
    lose theirs; ``file_name``, ``AT&T`` and ``_NET_WM_NAME`` in both sides keep them)."""
    kept_words = set(_WORD.findall(other))

    def strip(match: re.Match) -> str:
        word = match.group(0)
        return word if word in kept_words and not _MARKED_WORD.match(word) else _ACCELERATOR.sub("", word)

    return _WORD.sub(strip, text)


def _normalise(text: str) -> str:
    return _SPACE.sub(" ", html.unescape(text)).strip()


def clean_pair(source: str, target: str) -> tuple[str, str]:
    """``(source, target)`` as corpus lines: tags removed, accelerators removed, entities unescaped,
    whitespace (newlines and tabs included) collapsed to single spaces. Placeholders stay as they are."""
    source, target = _TAG.sub(" ", source), _TAG.sub(" ", target)
    source, target = (re.sub(_ENTITY, lambda m: m.group(0).replace("&", "\0"), s) for s in (source, target))
    source, target = _strip_accelerators(source, target), _strip_accelerators(target, source)
    return tuple(_normalise(s.replace("\0", "&")) for s in (source, target))


def drop_reason(source: str, target: str, limits: Limits) -> str | None:
    """Why a cleaned pair is not kept (one of :data:`DROP_REASONS`), or None."""
    if not all(_LETTER.search(_PLACEHOLDER.sub("", text)) for text in (source, target)):
        return "no_letters"
    if source == target:
        return "copied"
    if placeholders(source) != placeholders(target):
        return "placeholders"
    short, long = sorted((len(source), len(target)))
    if short < limits.min_chars or long > limits.max_chars:
        return "length"
    if long >= limits.ratio_from_chars and long > limits.max_ratio * short:
        return "ratio"
    return None


def split_key(source: str) -> str:
    """The English a split is decided by: casefolded, whitespace collapsed, edge punctuation removed
    (``Open…``, ``Open:`` and ``open`` share one split)."""
    return _EDGE_PUNCTUATION.sub("", _SPACE.sub(" ", source.casefold()))


def split_of(source: str, valid_fraction: float, test_fraction: float) -> str:
    """``valid``, ``test`` or ``train``, from the SHA-256 of :func:`split_key` read as a number in [0, 1)."""
    position = int.from_bytes(hashlib.sha256(split_key(source).encode()).digest()[:8], "big") / 2 ** 64
    if position < valid_fraction:
        return "valid"
    return "test" if position < valid_fraction + test_fraction else "train"


# -- catalogues ------------------------------------------------------------------------------------------

def is_catalogue(path: str, lang: str) -> bool:
    """A ``.mo``/``.po`` of language ``lang``: under a folder named ``lang`` or named ``lang.mo``/``lang.po``."""
    parts = Path(path).parts
    return Path(path).suffix in (".mo", ".po") and (lang in parts[:-1] or Path(path).stem == lang)


def catalogue_entries(path: Path) -> Iterator[tuple[str, str] | str]:
    """The entries of one catalogue as ``(msgid, msgstr)``, or the drop reason of those not usable
    (``plural``, ``fuzzy``, ``obsolete``, ``empty``). The header (empty msgid) is not an entry."""
    import polib

    catalogue = polib.mofile(str(path)) if path.suffix == ".mo" else polib.pofile(str(path))
    for entry in catalogue:
        if not entry.msgid:
            continue
        if entry.msgid_plural:
            yield "plural"
        elif "fuzzy" in entry.flags:
            yield "fuzzy"
        elif entry.obsolete:
            yield "obsolete"
        elif not entry.msgstr.strip():
            yield "empty"
        else:
            yield entry.msgid, entry.msgstr


def read_pins(path: str | Path = PACKAGES_FILE) -> list[tuple[str, str]]:
    """``(name, version)`` of each line ``NAME VERSION`` of a package list (``#`` starts a comment)."""
    pins = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 2:
            raise ValueError(f"{path}:{number}: expected 'NAME VERSION', got {line!r}")
        pins.append((fields[0], fields[1]))
    return pins


def _deb_field(deb: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], check=True, capture_output=True,
                          text=True).stdout.strip()


def _cached_deb(folder: Path, name: str, version: str | None) -> Path | None:
    for deb in sorted(folder.glob(f"{name}_*.deb")):
        if version is None or _deb_field(deb, "Version") == version:
            return deb
    return None


def _apt_download(spec: str, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["apt-get", "download", "-q", spec], cwd=cache, capture_output=True, text=True)


def fetch_package(name: str, version: str, cache: Path, log: Callable[[str], None],
                  any_version: bool = False, refreshed: list | None = None) -> Path:
    """The ``.deb`` of ``name`` at ``version`` in ``cache``, downloaded with ``apt-get download`` unless it is
    there. A version apt cannot fetch makes root refresh apt's lists once (``refreshed``: a list shared by one
    build, holding whether ``apt-get update`` succeeded once it ran) and try again; then it raises, saying the one command or option that helps,
    unless ``any_version`` takes the archive's current one (another corpus: the manifest records the versions read)."""
    deb = _cached_deb(cache, name, version)
    if deb is not None:
        return deb
    cache.mkdir(parents=True, exist_ok=True)
    done = _apt_download(f"{name}={version}", cache)
    if done.returncode != 0 and refreshed is not None and not refreshed and os.geteuid() == 0:
        log(f"apt-get download {name}={version} failed: refreshing apt's package lists (apt-get update) once")
        refreshed.append(subprocess.run(["apt-get", "update", "-q"], capture_output=True).returncode == 0)
        done = _apt_download(f"{name}={version}", cache)
    if done.returncode == 0:
        return _cached_deb(cache, name, version)
    error = (done.stderr.strip().splitlines() or ["no message"])[-1]
    if any_version and _apt_download(name, cache).returncode == 0:
        deb = _cached_deb(cache, name, None)
        log(f"{name} {version} is not in apt's lists: using {_deb_field(deb, 'Version')} (--any-version)")
        return deb
    refresh = "apt's lists were refreshed and still lack it: the archive no longer serves it" if any(refreshed or []) else \
        "run 'apt-get update' as root (lists older than the pin miss it)"
    raise CorpusUnavailable(
        f"apt-get download {name}={version} failed ({error}): {refresh}. The committed corpus needs no download "
        "(the nmt-l10n task unpacks it); to build one anyway, give the .deb files with --debs DIR, or take the "
        "archive's current versions with --any-version (a different corpus: its rows never pair with the "
        "committed one's)")


def given_package(folder: Path, name: str, version: str, any_version: bool = False) -> Path:
    """The ``.deb`` of ``name`` at ``version`` among the files of ``folder`` (``--debs``); another version
    of it only with ``any_version``."""
    deb = _cached_deb(folder, name, version) or (_cached_deb(folder, name, None) if any_version else None)
    if deb is None:
        other = _cached_deb(folder, name, None)
        raise CorpusUnavailable(f"no {name}_*.deb at the pinned version {version} in {folder}"
                                + (f" (it holds {_deb_field(other, 'Version')}; --any-version takes it)" if other else ""))
    return deb


def _licences(copyright_text: str) -> list[str]:
    """The licence names of a Debian copyright file (machine-readable format), in first-seen order."""
    names = re.findall(r"^License:[ \t]*(\S.*)$", copyright_text, re.MULTILINE)
    return list(dict.fromkeys(name.strip() for name in names)) or ["see the package's copyright file"]


def unpack_catalogues(deb: Path, lang: str, dest: Path) -> tuple[list[Path], list[str]]:
    """Extract the ``lang`` catalogues of ``deb`` into ``dest``: their paths, sorted, and the licences
    of its copyright file (``usr/share/doc/<package>/copyright``)."""
    package = _deb_field(deb, "Package")
    copyright_path = f"usr/share/doc/{package}/copyright"
    pipe = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    catalogues, licences = [], ["see the package's copyright file"]
    with tarfile.open(fileobj=pipe.stdout, mode="r|") as archive:
        for member in archive:
            path = member.name.removeprefix("./")
            if not member.isfile():
                continue
            if path == copyright_path:
                licences = _licences(archive.extractfile(member).read().decode("utf-8", "replace"))
            elif is_catalogue(path, lang):
                target = dest / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.extractfile(member).read())
                catalogues.append(target)
    if pipe.wait() != 0:
        raise RuntimeError(f"dpkg-deb could not read {deb}")
    return sorted(catalogues), licences


# -- the corpus ------------------------------------------------------------------------------------------

def collect_pairs(entries: Iterable[tuple[str, str] | str], limits: Limits, seen: set, dropped: Counter
                  ) -> Iterator[tuple[str, str]]:
    """The kept, cleaned, first-seen pairs of ``entries`` (as :func:`catalogue_entries` gives them);
    each dropped entry counted under its reason in ``dropped``, ``seen`` the pairs kept so far."""
    for entry in entries:
        if isinstance(entry, str):
            dropped[entry] += 1
            continue
        pair = clean_pair(*entry)
        reason = drop_reason(*pair, limits) or ("duplicate" if pair in seen else None)
        if reason:
            dropped[reason] += 1
            continue
        seen.add(pair)
        yield pair


def _read_packages(pins: list[tuple[str, str]], lang: str, limits: Limits, cache: Path, debs: str | Path | None,
                   any_version: bool, log: Callable[[str], None], refreshed: list) -> tuple[list, list, Counter]:
    """The package records, the kept pairs (first-seen order, deduplicated) and the drop counts of ``pins``
    (``refreshed``: as :func:`fetch_package`'s)."""
    records, kept, dropped, seen = [], [], Counter(), set()
    with tempfile.TemporaryDirectory(prefix="l10n-catalogues-") as scratch:
        for number, (name, version) in enumerate(pins, 1):
            record = PackageRecord(name=name, pinned=version)
            deb = given_package(Path(debs), name, version, any_version) if debs else \
                fetch_package(name, version, cache, log, any_version, refreshed)
            record.version = _deb_field(deb, "Version")
            record.sha256 = hashlib.sha256(deb.read_bytes()).hexdigest()
            catalogues, record.licences = unpack_catalogues(deb, lang, Path(scratch) / name)
            record.catalogues = len(catalogues)
            for catalogue in catalogues:
                entries = list(catalogue_entries(catalogue))
                record.entries += len(entries)
                for pair in collect_pairs(entries, limits, seen, dropped):
                    kept.append(pair)
                    record.kept += 1
            shutil.rmtree(Path(scratch) / name, ignore_errors=True)
            records.append(record)
            log(f"[{number}/{len(pins)}] {name} {record.version}: {record.catalogues} catalogues, "
                f"{record.entries} entries, {record.kept} pairs kept")
    return records, kept, dropped


def build_corpus(out: str | Path, lang: str = "de", packages: str | Path = PACKAGES_FILE,
                 heldout_packages: str | Path | None = None, cache: str | Path | None = None,
                 debs: str | Path | None = None, limits: Limits = Limits(), valid_fraction: float = 0.02,
                 test_fraction: float = 0.02, force: bool = False, any_version: bool = False,
                 log: Callable[[str], None] = print) -> Path:
    """Build the English-``lang`` corpus of the packages in ``packages`` into ``out`` (see the module
    docstring) and return ``out``; with ``heldout_packages`` (a package list none of whose names is in
    ``packages``) also its ``heldout`` split. ``debs``: a folder of ``.deb`` files to read instead of
    downloading into ``cache`` (default ``$ATTNBENCH_CACHE/debs``), each at its pinned version unless
    ``any_version`` (:func:`fetch_package`). A finished ``out`` is left as it is unless ``force``."""
    out = Path(out)
    if (out / "manifest.json").is_file() and not force:
        log(f"{out} is built (manifest.json); --force rebuilds it")
        return out
    if not (0 < valid_fraction and 0 < test_fraction and valid_fraction + test_fraction < 1):
        raise ValueError("valid and test fractions must be positive and sum to less than 1")
    for tool in ("dpkg-deb",) + (() if debs else ("apt-get",)):
        if shutil.which(tool) is None:
            raise CorpusUnavailable(
                f"no {tool} on this machine: the l10n corpus is built from Debian packages; give your own "
                "parallel files instead (train/valid/test.en and .de in one folder, set as the config's data_root)")
    pins = read_pins(packages)
    heldout_pins = read_pins(heldout_packages) if heldout_packages else []
    shared = sorted({name for name, _ in pins} & {name for name, _ in heldout_pins})
    if shared:
        raise ValueError(f"{heldout_packages}: held-out packages must not be in the corpus's list; "
                         f"{', '.join(shared)} are in {packages}")
    cache = Path(cache or Path(os.environ.get("ATTNBENCH_CACHE", Path.home() / ".cache" / "attnbench")) / "debs")
    started = time.time()
    refreshed = []  # apt's lists are refreshed at most once a build
    records, kept, dropped = _read_packages(pins, lang, limits, cache, debs, any_version, log, refreshed)
    pairs = {split: [] for split in SPLITS}
    for source, target in kept:
        pairs[split_of(source, valid_fraction, test_fraction)].append((source, target))
    heldout = None
    if heldout_pins:
        heldout_records, heldout_kept, heldout_dropped = _read_packages(
            heldout_pins, lang, limits, cache, debs, any_version, log, refreshed)
        trained = {split_key(source) for source, _ in pairs["train"]}
        pairs[HELDOUT] = [pair for pair in heldout_kept if split_key(pair[0]) not in trained]
        heldout_dropped["in_train"] = len(heldout_kept) - len(pairs[HELDOUT])
        heldout = dict(rule="the catalogues of other packages, without any English string (split key) of train",
                       entries=sum(r.entries for r in heldout_records),
                       dropped={r: heldout_dropped[r] for r in DROP_REASONS},
                       packages=[asdict(r) for r in heldout_records])
    return _write(out, lang, pairs, records, dropped, heldout, limits, valid_fraction, test_fraction, started, log)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def corpus_digest(files: dict[str, str], lang: str = "de") -> str:
    """The corpus's identity: the SHA-256 over the SHA-256s of its six train/valid/test files (``files``:
    name -> SHA-256, as the manifest's), first 16 hex digits. The held-out split is not part of it."""
    names = [f"{split}.{side}" for split in SPLITS for side in ("en", lang)]
    return hashlib.sha256("".join(f"{name} {files[name]}\n" for name in names).encode()).hexdigest()[:16]


def corpus_of(data_root: str | Path) -> str:
    """The digest of the corpus in ``data_root`` (its manifest's ``corpus``); ``""`` where its manifest records
    none (a corpus of format 1) or it has no manifest (parallel text of your own, the mini corpus)."""
    manifest = Path(data_root) / "manifest.json"
    return json.loads(manifest.read_text()).get("corpus", "") if manifest.is_file() else ""


def _notice(manifest: dict) -> str:
    """The licence notice of a corpus: where its text comes from, and each package's licences."""
    lines = ["# Licence notice", "",
             f"This corpus holds the English messages and their {manifest['target']} translations of the Debian "
             "packages below (their gettext catalogues, cleaned; attnbench/data/l10n_corpus.py). Each message "
             "stays under the licence of the package it comes from, as that package's copyright file states; "
             "the licences found there are listed. Debian's archive holds each package's source and full "
             "copyright file.", "", "| package | version | split | licences |", "|---|---|---|---|"]
    for split, records in (("train/valid/test", manifest["packages"]),
                           (HELDOUT, (manifest.get(HELDOUT) or {}).get("packages", []))):
        lines += [f"| {r['name']} | {r['version']} | {split} | {'; '.join(r['licences'])} |" for r in records]
    return "\n".join(lines) + "\n"


def _write(out: Path, lang: str, pairs: dict, records: list, dropped: Counter, heldout: dict | None, limits: Limits,
           valid_fraction: float, test_fraction: float, started: float, log: Callable[[str], None]) -> Path:
    """Write the splits (train in hash order, so packages mix), the manifest and the licence notice, then
    rename into ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = out.with_name(f"{out.name}.tmp-{uuid.uuid4().hex[:8]}")
    scratch.mkdir()
    try:
        files = {}
        for split, rows in pairs.items():
            if split == "train":
                rows.sort(key=lambda pair: hashlib.sha256("\t".join(pair).encode()).digest())
            for side, suffix in enumerate(("en", lang)):
                path = scratch / f"{split}.{suffix}"
                path.write_text("".join(f"{pair[side]}\n" for pair in rows), encoding="utf-8")
                files[path.name] = _sha256(path)
        manifest = dict(
            format=FORMAT_VERSION, source="en", target=lang, built=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            seconds=round(time.time() - started, 1), corpus=corpus_digest(files, lang),
            pairs={split: len(rows) for split, rows in pairs.items()}, files=files,
            entries=sum(r.entries for r in records), dropped={r: dropped[r] for r in DROP_REASONS if r != "in_train"},
            split=dict(rule="sha256 of the casefolded English without edge punctuation", valid=valid_fraction,
                       test=test_fraction),
            limits=asdict(limits), packages=[asdict(r) for r in records])
        if heldout is not None:
            manifest[HELDOUT] = heldout
        (scratch / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        (scratch / "NOTICE.md").write_text(_notice(manifest))
        if out.exists():
            shutil.rmtree(out)
        scratch.rename(out)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    log(f"{out}: {manifest['pairs']} pairs from {len(records)} packages ({manifest['entries']} entries) "
        f"in {manifest['seconds']:.0f} s; corpus {manifest['corpus']}")
    return out


# -- the committed corpus --------------------------------------------------------------------------------

def committed_manifest(archive: Path = COMMITTED_CORPUS) -> dict:
    """The manifest of the committed corpus (the tarball's first member)."""
    with tarfile.open(archive, "r:xz") as tar:
        member = tar.next()
        if member is None or Path(member.name).name != "manifest.json":
            raise ValueError(f"{archive}: its first member is not manifest.json")
        return json.loads(tar.extractfile(member).read())


def pack_corpus(folder: str | Path, archive: str | Path = COMMITTED_CORPUS) -> Path:
    """Write the corpus in ``folder`` as the xz tarball ``archive``: manifest.json first, then the notice and
    the split files, with fixed owners and times, so one corpus always packs into the same bytes."""
    folder, archive = Path(folder), Path(archive)
    manifest = json.loads((folder / "manifest.json").read_text())
    names = ["manifest.json", "NOTICE.md", *manifest["files"]]
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:xz", preset=9) as tar:
        for name in names:
            info = tar.gettarinfo(str(folder / name), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            info.mode = 0o644
            with open(folder / name, "rb") as file:
                tar.addfile(info, file)
    return archive


def unpack_committed(out: str | Path, archive: Path = COMMITTED_CORPUS, log: Callable[[str], None] = print) -> Path:
    """The committed corpus unpacked into ``out`` (through a temporary folder beside it, renamed at the end),
    each file checked against the manifest's SHA-256; a finished ``out`` is left as it is."""
    out = Path(out)
    if (out / "manifest.json").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = out.with_name(f"{out.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        with tarfile.open(archive, "r:xz") as tar:
            tar.extractall(scratch, filter="data")
        manifest = json.loads((scratch / "manifest.json").read_text())
        bad = [name for name, digest in manifest["files"].items() if _sha256(scratch / name) != digest]
        if bad:
            raise ValueError(f"{archive} is damaged: {', '.join(bad)} do not match its manifest")
        if out.exists():  # an empty folder, or another process's finished copy
            if (out / "manifest.json").is_file():
                return out
            out.rmdir()
        scratch.rename(out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    log(f"{out}: the committed corpus {manifest['corpus']} ({manifest['pairs']} pairs) unpacked")
    return out


def compare_with_committed(folder: str | Path, archive: Path = COMMITTED_CORPUS) -> list[str]:
    """How the corpus in ``folder`` differs from the committed one: one line a differing file or package
    version (none: identical)."""
    built, committed = json.loads((Path(folder) / "manifest.json").read_text()), committed_manifest(archive)
    lines = [f"{name}: {'missing' if name not in built['files'] else 'differs'} "
             f"({built['pairs'].get(name.split('.')[0], 0)} pairs here, "
             f"{committed['pairs'].get(name.split('.')[0], 0)} committed)"
             for name, digest in committed["files"].items() if built["files"].get(name) != digest]
    lines += [f"{name}: not in the committed corpus" for name in built["files"] if name not in committed["files"]]
    versions = {r["name"]: r["version"] for r in committed["packages"] + committed.get(HELDOUT, {}).get("packages", [])}
    for record in built["packages"] + built.get(HELDOUT, {}).get("packages", []):
        if versions.get(record["name"]) != record["version"]:
            lines.append(f"package {record['name']}: {record['version']} here, "
                         f"{versions.get(record['name'], 'not in it')} committed")
    return lines
