"""Learning curves of translation runs: validation BLEU and chrF against training CPU-minutes.

    python tools/train.py configs/translation/transformer-small_l10n-ende.py --curve 500 --work-dir W
    python tools/learning_curves.py results/l10n-curves                  # the table (markdown)
    python tools/learning_curves.py results/l10n-curves --plot --copy data/l10n-ende

Each folder under the root holds one run's ``curve.jsonl`` (``tools/train.py --curve``) and its dumped
config. ``--plot`` writes ROOT/curves.png and .svg; ``--copy DATA_ROOT`` adds the scores of copying the
source of its valid and held-out splits (the bar a model that translates clears).
"""
import argparse
import sys
from pathlib import Path

from attnbench.analysis.curves import copy_scores, curve_table, plot_curves, read_curves


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", help="folder of curve folders (each with curve.jsonl and the dumped config)")
    p.add_argument("--plot", action="store_true", help="write ROOT/curves.png and ROOT/curves.svg")
    p.add_argument("--copy", metavar="DATA_ROOT", help="add the copy-the-source scores of its valid and heldout splits")
    args = p.parse_args(argv)
    try:
        curves = read_curves(args.root)
    except ValueError as error:
        sys.exit(f"learning_curves.py: error: {error}")
    print(curve_table(curves).to_markdown(index=False))
    references = {}
    if args.copy:
        for split in ("valid", "heldout"):
            if (Path(args.copy) / f"{split}.en").is_file():
                scores = copy_scores(args.copy, split)
                references[f"copying the source ({split})"] = scores["BLEU"]
                if split == "valid":
                    references["copying the source + 8 (valid)"] = scores["BLEU"] + 8
                print(f"\ncopying the source, {split}: BLEU {scores['BLEU']:.1f}, chrF {scores['chrF']:.1f}")
    if args.plot:
        for path in plot_curves(curves, Path(args.root) / "curves", references=references):
            print(path)


if __name__ == "__main__":
    main()
