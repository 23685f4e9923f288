"""The translation data path at scale: first build of the token store, its size, and opening it again.

    python tools/benchmark_translation_data.py --pairs 1000000 --workdir /tmp/tokbench
    python tools/benchmark_translation_data.py --pairs 50000

Generates a parallel corpus of ``--pairs`` lines per side (random lowercase words of 2 to 10
letters, 5 to 45 words per sentence, seeded) and a joint BPE sentencepiece model of
``--vocab-size`` pieces trained on at most ``SPM_SAMPLE`` of its lines (both kept in ``--workdir``
for the next run). It then removes any token store there and, each in a fresh process, constructs
the training :class:`attnbench.data.translation.ParallelTextDataset` (as the full-scale config
does, ``max_length=256``) twice:

* first build: the store is encoded and written (what the first rank does once);
* open: a later process (another rank, a restart) maps the built store and reads ``lengths``;

and, for comparison, the in-memory path the dataset had before the store (every rank, at every
start: both files read whole, encoded, one NumPy array per sentence).

Memory growth is the process's peak resident memory during the construction minus its resident
memory after the imports (``VmHWM`` reset through ``/proc/self/clear_refs``, so Linux only); mapped
store pages read count as resident. Opening runs right after the build, with the files in the page
cache. Progress goes to stderr and the build's log lines to stdout; the table comes last, on stdout.
"""
from __future__ import annotations

import argparse
import multiprocessing
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SPM_SAMPLE = 200_000  # lines the subword model is trained on
WORDS_PER_SENTENCE = (5, 45)
LETTERS_PER_WORD = (2, 10)
GENERATE_CHUNK = 100_000  # sentences generated at a time


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write_random_text(path: Path, sentences: int, rng: np.random.Generator) -> None:
    """``sentences`` lines of random words (see the module docstring), written chunk by chunk."""
    with open(path, "wb") as f:
        for start in range(0, sentences, GENERATE_CHUNK):
            count = min(GENERATE_CHUNK, sentences - start)
            words = rng.integers(WORDS_PER_SENTENCE[0], WORDS_PER_SENTENCE[1] + 1, count)
            letters = rng.integers(LETTERS_PER_WORD[0], LETTERS_PER_WORD[1] + 1, int(words.sum()))
            text = rng.integers(ord("a"), ord("z") + 1, int(letters.sum() + len(letters)), dtype=np.uint8)
            separators = np.cumsum(letters + 1) - 1  # each word is followed by a space or, last, a newline
            text[separators] = ord(" ")
            text[separators[np.cumsum(words) - 1]] = ord("\n")
            f.write(text.tobytes())


def prepare(workdir: Path, pairs: int, vocab_size: int, seed: int) -> dict:
    """The corpus and the subword model in ``workdir`` (reused when there), and no token store."""
    from attnbench.data.translation import joint_sentencepiece

    workdir.mkdir(parents=True, exist_ok=True)
    files = [workdir / f"train-{pairs}-{seed}.{side}" for side in ("src", "tgt")]
    for side, path in enumerate(files):
        if not path.is_file():
            log(f"writing {pairs:,} random sentences to {path}")
            write_random_text(path.with_suffix(".partial"), pairs, np.random.default_rng([seed, side]))
            path.with_suffix(".partial").rename(path)
    spm_options = dict(vocab_size=vocab_size, model_type="bpe", input_sentence_size=min(SPM_SAMPLE, 2 * pairs))
    log(f"subword model: {vocab_size:,} BPE pieces on at most {SPM_SAMPLE:,} lines (trained once per corpus)")
    joint_sentencepiece(files, model_dir=workdir, **spm_options)
    for old in workdir.glob("tokens-*"):
        if old.is_dir():
            shutil.rmtree(old)
        else:
            old.unlink()
    return dict(data_root=str(workdir), data_prefix=dict(src=files[0].name, tgt=files[1].name),
                tokenizer=dict(spm_options, train_files=[f.name for f in files]),
                filter_cfg=dict(min_length=1, max_length=256))


def memory_mb(field: str) -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (peak resident) of this process, from /proc (Linux)."""
    return int(re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)[1]) / 1024


def construct_dataset(dataset_args: dict) -> dict:
    """In a fresh process: seconds and peak memory growth (MB) to construct the dataset and read ``lengths``."""
    from attnbench.data.translation import ParallelTextDataset

    Path("/proc/self/clear_refs").write_text("5")  # the peak restarts from what the imports left resident
    baseline = memory_mb("VmRSS")
    start = time.perf_counter()
    dataset = ParallelTextDataset(**dataset_args)
    lengths = dataset.lengths
    seconds = time.perf_counter() - start
    store = dataset.store
    return dict(seconds=seconds, memory_mb=memory_mb("VmHWM") - baseline, samples=len(lengths),
                tokens=sum(store.header["tokens"].values()), pairs=len(store),
                ids_bytes=sum((store.path / f"{side}.ids").stat().st_size for side in ("src", "tgt")),
                store_bytes=sum(f.stat().st_size for f in store.path.iterdir()))


def encode_in_memory(dataset_args: dict) -> dict:
    """In a fresh process: seconds and peak memory growth (MB) of the path before the store."""
    import os

    import sentencepiece as spm

    from attnbench.data.translation import joint_sentencepiece

    root = Path(dataset_args["data_root"])
    tokenizer = dict(dataset_args["tokenizer"])
    model = joint_sentencepiece([root / f for f in tokenizer.pop("train_files")], model_dir=root, **tokenizer)
    Path("/proc/self/clear_refs").write_text("5")
    baseline = memory_mb("VmRSS")
    start = time.perf_counter()
    sp = spm.SentencePieceProcessor(model_file=str(model))
    sides = []
    for name in ("src", "tgt"):
        with open(root / dataset_args["data_prefix"][name], encoding="utf-8", newline="\n") as f:
            lines = [line.strip() for line in f]
        sides.append(sp.encode(lines, out_type=int, num_threads=os.cpu_count() or 1))
    samples = [dict(src_ids=np.array(s, np.int32), tgt_ids=np.array(t, np.int32)) for s, t in zip(*sides)]
    seconds = time.perf_counter() - start
    return dict(seconds=seconds, memory_mb=memory_mb("VmHWM") - baseline, samples=len(samples))


def in_fresh_process(function, dataset_args: dict) -> dict:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, (dataset_args,))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000, help="sentence pairs of the generated corpus")
    parser.add_argument("--workdir", type=Path, help="where the corpus, model and store go (default: a temporary "
                        "folder, removed at the end)")
    parser.add_argument("--vocab-size", type=int, default=8000, help="pieces of the joint BPE model")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error(f"--pairs must be positive, got {args.pairs}")
    temporary = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="tokbench-")) if temporary else args.workdir
    try:
        dataset_args = prepare(workdir, args.pairs, args.vocab_size, args.seed)
        log("first build of the token store (fresh process)")
        build = in_fresh_process(construct_dataset, dataset_args)
        log(f"built in {build['seconds']:.1f} s; opening it in another fresh process")
        opened = in_fresh_process(construct_dataset, dataset_args)
        log("the in-memory path before the store (fresh process)")
        before = in_fresh_process(encode_in_memory, dataset_args)
    finally:
        if temporary:
            shutil.rmtree(workdir, ignore_errors=True)
    print("| pairs | subwords per side | first build: time | first build: peak memory growth | store on disk "
          "| bytes per subword (ids / all files) | open in a new process: time | open: memory growth |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {build['pairs']:,} | {build['tokens'] / (2 * build['pairs']):.1f} | {build['seconds']:.1f} s "
          f"| {build['memory_mb']:,.0f} MB | {build['store_bytes'] / 1e6:,.1f} MB "
          f"| {build['ids_bytes'] / build['tokens']:.2f} / {build['store_bytes'] / build['tokens']:.2f} "
          f"| {opened['seconds']:.2f} s | {opened['memory_mb']:,.0f} MB |")
    print(f"\nBefore the store, every process encoded the corpus in memory: {before['seconds']:.1f} s and "
          f"{before['memory_mb']:,.0f} MB of peak memory growth, at every start.")


if __name__ == "__main__":
    main()
