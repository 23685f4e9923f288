"""Write the generated variant configs under configs/ (one file per task, preset and variant).

    python tools/generate_configs.py          # (re)write them
    python tools/generate_configs.py --check  # exit 1 if any file is missing or out of date
    python tools/generate_configs.py --variants 0100:range=3,1111:stages=3-5   # configs of rows with parameters
"""
import argparse
import sys

from attnbench.config_files import CONFIG_ROOT, generated_vision_configs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="only check that the files are up to date")
    p.add_argument("--variants", help="comma-separated variants to write instead of the benchmark's rows, with "
                   "parameters if any (docs/sweep.md#variants-and-their-parameters)")
    args = p.parse_args()
    try:
        configs = generated_vision_configs(args.variants.split(",") if args.variants else None)
    except ValueError as error:
        sys.exit(f"generate_configs.py: error: {error}")
    stale = []
    for path, text in configs.items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(text)
    verb = "out of date" if args.check else "written"
    for path in stale:
        print(f"{verb}: {path.relative_to(CONFIG_ROOT.parent)}")
    print(f"{len(stale)} config(s) {verb}")
    sys.exit(1 if args.check and stale else 0)


if __name__ == "__main__":
    main()
