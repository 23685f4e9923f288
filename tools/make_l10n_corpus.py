"""Build the English-German corpus of Debian's translation catalogues (real user-interface text).

    python tools/make_l10n_corpus.py                      # into data/l10n-ende (the nmt-l10n task's data_root)
    python tools/make_l10n_corpus.py --debs DIR           # from .deb files already downloaded, no network
    python tools/make_l10n_corpus.py --out data/l10n-ende --force   # rebuild
    python tools/make_l10n_corpus.py --out data/l10n-ende --pack    # ... and commit it (maintainers)

The nmt-l10n task does not need this: it unpacks the committed corpus (attnbench/data/corpora/
l10n-ende.tar.xz). This rebuilds it from Debian's archive, for a check, another language or newer
packages. It downloads the pinned packages (attnbench/data/l10n_packages.txt and, for the held-out
split, l10n_heldout_packages.txt) with ``apt-get download`` into ``$ATTNBENCH_CACHE/debs`` (default
~/.cache/attnbench/debs), reads their German gettext catalogues and writes train/valid/test/heldout.{en,de},
manifest.json (packages, versions, licences, pairs kept and dropped per reason, each file's SHA-256)
and NOTICE.md (the licences); then it says whether the corpus is identical to the committed one, or
what differs. See attnbench/data/l10n_corpus.py for the cleaning and the split rules.
"""
import argparse
import sys

from attnbench.data.l10n_corpus import (COMMITTED_CORPUS, HELDOUT_PACKAGES_FILE, PACKAGES_FILE, CorpusUnavailable,
                                        Limits, build_corpus, compare_with_committed, pack_corpus)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="data/l10n-ende", help="output folder (default: %(default)s)")
    p.add_argument("--lang", default="de", help="catalogue language, the target side (default: %(default)s)")
    p.add_argument("--packages", default=str(PACKAGES_FILE), help="package list, 'NAME VERSION' a line")
    p.add_argument("--heldout-packages", default=str(HELDOUT_PACKAGES_FILE),
                   help="package list of the held-out split ('' for none; default: %(default)s)")
    p.add_argument("--cache", help="download folder for the .deb files (default: $ATTNBENCH_CACHE/debs)")
    p.add_argument("--debs", help="read the .deb files from this folder instead of downloading them")
    p.add_argument("--max-chars", type=int, default=Limits.max_chars, help="longest side kept, in characters")
    p.add_argument("--valid-fraction", type=float, default=0.02, help="share of English strings in valid")
    p.add_argument("--test-fraction", type=float, default=0.02, help="share of English strings in test")
    p.add_argument("--force", action="store_true", help="rebuild a finished corpus")
    p.add_argument("--pack", action="store_true", help=f"write the corpus as the committed one ({COMMITTED_CORPUS})")
    p.add_argument("--any-version", action="store_true",
                   help="take the archive's current version of a package whose pinned one apt cannot fetch "
                        "(a different corpus from the pinned one; the manifest records the versions)")
    args = p.parse_args()
    try:
        out = build_corpus(args.out, lang=args.lang, packages=args.packages,
                           heldout_packages=args.heldout_packages or None, cache=args.cache, debs=args.debs,
                           limits=Limits(max_chars=args.max_chars), valid_fraction=args.valid_fraction,
                           test_fraction=args.test_fraction, force=args.force, any_version=args.any_version,
                           log=lambda line: print(line, flush=True))
    except CorpusUnavailable as error:
        sys.exit(f"make_l10n_corpus: {error}")
    except ValueError as error:
        p.error(str(error))
    if args.pack:
        print(f"packed into {pack_corpus(out)}")
    elif COMMITTED_CORPUS.is_file():
        differences = compare_with_committed(out)
        print(f"{out}: " + ("identical to the committed corpus" if not differences else
                            "differs from the committed corpus (a different corpus: its rows never pair with the "
                            "committed one's):\n  " + "\n  ".join(differences)))


if __name__ == "__main__":
    main()
