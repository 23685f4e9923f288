"""Write the mini-shapes detection and segmentation datasets into a new folder.

    python tools/make_mini_data.py --root data/mini_shapes [--rule key-stripe] [--seed 0] [--num-train 400] [--num-val 100]

Training does not need this (the mini-shapes datasets generate ``data_root`` on first use); it is
for looking at the data, or for preparing it once on shared storage. See
:mod:`attnbench.data.mini_shapes` for the layout and the design.
"""
import argparse
import time

from attnbench.data.mini_shapes import DEFAULT_RULE, IMAGE_SIZE, NUM_TRAIN, NUM_VAL, RULES, make_mini_shapes


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", required=True, help="output folder (new or empty)")
    p.add_argument("--rule", default=DEFAULT_RULE, choices=list(RULES),
                   help="what decides an object's class (see attnbench/data/mini_shapes.py)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-train", type=int, default=NUM_TRAIN)
    p.add_argument("--num-val", type=int, default=NUM_VAL)
    p.add_argument("--image-size", type=int, default=IMAGE_SIZE, help="side of the square images, in pixels")
    args = p.parse_args()
    start = time.perf_counter()
    try:
        summary = make_mini_shapes(args.root, num_train=args.num_train, num_val=args.num_val,
                                   image_size=args.image_size, seed=args.seed, rule=args.rule)
    except (ValueError, FileExistsError) as error:
        p.error(str(error))
    print(f"mini shapes ({args.rule}), {args.image_size}x{args.image_size}, seed {args.seed}, into {args.root} "
          f"in {time.perf_counter() - start:.1f} s:")
    for split, counts in summary.items():
        objects = ", ".join(f"{n} {name}" for name, n in counts.items() if name != "images")
        print(f"  {split}: {counts['images']} images ({objects} objects): images/{split}/, ann_dir/{split}/, "
              f"annotations/instances_{split}.json")
    print("  img_dir -> images, mini_shapes.json (the parameters)")


if __name__ == "__main__":
    main()
