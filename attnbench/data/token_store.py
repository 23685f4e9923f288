"""A token store for parallel text: encoded once, then memory-mapped read-only by every process.

:func:`ensure_token_store` encodes a source and a target file (one sentence per line) with a
sentencepiece model into the folder ``<store_dir>/tokens-<source>-<target>-<digest>/``, where the
digest covers both files, the model and the format version, so new text or a new model gets a new
store. The folder holds, for each side ``src`` and ``tgt`` of N sentence pairs::

    <side>.ids      all subword ids, sentence after sentence; the smallest unsigned integer type
                    that holds the vocabulary (uint8 up to 256 pieces, uint16 up to 65,536, else uint32)
    <side>.offsets  int64, N + 1: sentence i is ids[offsets[i]:offsets[i + 1]]
    <side>.lengths  uint32, N: offsets[i + 1] - offsets[i]
    header.json     format version, number of pairs, ids per side, id type, the inputs (last written)

The arrays are raw binaries in the machine's byte order (``numpy.memmap``): 2 bytes per subword
with a vocabulary of up to 65,536 pieces. One process builds, streaming ``CHUNK_PAIRS`` pairs at a time,
into a temporary folder under the file lock ``<store>.lock`` and renames it into place; the others
wait for the lock (distributed ranks also at a barrier) and then open it. A store folder without
its header (unfinished) is rebuilt; one whose files do not have the sizes its header gives is
damaged, and :class:`TokenStore` raises one line saying which folder to delete.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import sentencepiece as spm
from mmengine.dist import barrier, is_main_process
from mmengine.logging import print_log

from .build_once import build_once

FORMAT_VERSION = 1
HEADER = "header.json"
SIDES = ("src", "tgt")
OFFSET_DTYPE, LENGTH_DTYPE = np.dtype("int64"), np.dtype("uint32")
CHUNK_PAIRS = 10_000  # sentence pairs encoded at a time while building
LOG_EVERY = 1_000_000  # pairs between progress lines


def _run_on_main_process(function, *args, **kwargs) -> None:
    """Call ``function`` on the main process only; the others wait for it (file writers)."""
    if is_main_process():
        function(*args, **kwargs)
    barrier()


def _digest(files: Sequence[Path], options: dict) -> str:
    """SHA-1 of the files' contents and the options, 10 hex digits."""
    sha = hashlib.sha1(json.dumps(options, sort_keys=True).encode())
    for path in files:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                sha.update(block)
    return sha.hexdigest()[:10]


def read_line_pairs(source: str | Path, target: str | Path) -> Iterator[tuple[str, str]]:
    """Stripped line pairs of two aligned files, read as they are consumed.

    Lines end at ``'\\n'`` only, as sentencepiece reads them. Raises ValueError, once the files are
    read, if either has no text or their line counts differ.
    """
    counts, has_text = [0, 0], [False, False]
    with open(source, encoding="utf-8", newline="\n") as src, open(target, encoding="utf-8", newline="\n") as tgt:
        for raw in itertools.zip_longest(src, tgt):  # None past the shorter file's end
            pair = [None if line is None else line.strip() for line in raw]
            for side, line in enumerate(pair):
                if line is not None:
                    counts[side] += 1
                    has_text[side] = has_text[side] or bool(line)
            if None not in pair:
                yield pair[0], pair[1]
    for path, text in zip((source, target), has_text):
        if not text:
            raise ValueError(f"parallel text file {path} is empty")
    if counts[0] != counts[1]:
        raise ValueError(f"misaligned parallel text: {source} has {counts[0]} lines, {target} has {counts[1]}; "
                         "the files must hold one sentence pair per line")


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds ids 0 to ``vocab_size - 1``."""
    return np.min_scalar_type(vocab_size - 1)


def ensure_token_store(source: str | Path, target: str | Path, tokenizer: str | Path,
                       store_dir: str | Path) -> Path:
    """Folder of the token store of ``source`` and ``target`` encoded by ``tokenizer``, built on first use."""
    files = [Path(source), Path(target)]
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"parallel text file not found: {path}")
    stamps = [_stamp(path) for path in files]
    digest = _digest([*files, Path(tokenizer)], dict(format=FORMAT_VERSION))
    store = Path(store_dir) / f"tokens-{files[0].name}-{files[1].name}-{digest}"
    _run_on_main_process(_build_once, store, files, Path(tokenizer), stamps)
    return store


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def _build_once(store: Path, files: list[Path], tokenizer: Path, stamps: list[tuple[int, int]]) -> None:
    """Build ``store`` unless it is there; safe from many processes (see the module docstring). A folder
    without a header was left by a killed builder and is built again."""
    def write(tmp: Path) -> None:
        print_log(f"encoding {files[0]} and {files[1]} into the token store {store} (once)", logger="current")
        _write_store(tmp, files, tokenizer, stamps)

    build_once(store, lambda folder: (folder / HEADER).is_file(), write, clear_unfinished=True)


def _write_store(folder: Path, files: list[Path], tokenizer: Path, stamps: list[tuple[int, int]]) -> None:
    sp = spm.SentencePieceProcessor(model_file=str(tokenizer))
    dtype = token_dtype(sp.get_piece_size())
    threads = os.cpu_count() or 1
    pairs, tokens = 0, dict.fromkeys(SIDES, 0)
    folder.mkdir()
    with ExitStack() as stack:
        out = {name: stack.enter_context(open(folder / name, "wb")) for name in _layout(dtype, pairs, tokens)}
        for side in SIDES:
            np.zeros(1, OFFSET_DTYPE).tofile(out[f"{side}.offsets"])
        line_pairs = read_line_pairs(*files)
        while chunk := list(itertools.islice(line_pairs, CHUNK_PAIRS)):
            for side, lines in zip(SIDES, zip(*chunk)):
                encoded = sp.encode(list(lines), out_type=int, num_threads=threads)
                lengths = np.fromiter(map(len, encoded), LENGTH_DTYPE, len(encoded))
                ends = tokens[side] + np.cumsum(lengths, dtype=OFFSET_DTYPE)
                ids = np.fromiter(itertools.chain.from_iterable(encoded), dtype, int(ends[-1]) - tokens[side])
                ids.tofile(out[f"{side}.ids"])
                ends.tofile(out[f"{side}.offsets"])
                lengths.tofile(out[f"{side}.lengths"])
                tokens[side] = int(ends[-1])
            pairs += len(chunk)
            if pairs % LOG_EVERY == 0:
                print_log(f"token store: {pairs:,} pairs encoded", logger="current")
    for path, stamp in zip(files, stamps):
        if _stamp(path) != stamp:
            raise RuntimeError(f"{path} changed while its token store was being built; build it again once the "
                               "file is complete")
    inputs = {side: dict(path=str(path), size=stamp[0], mtime_ns=stamp[1])
              for side, path, stamp in zip(SIDES, files, stamps)}
    header = dict(format=FORMAT_VERSION, pairs=pairs, tokens=tokens, token_dtype=dtype.name,
                  inputs=dict(inputs, tokenizer=str(tokenizer)))
    (folder / HEADER).write_text(json.dumps(header, indent=1))  # last: the header marks a finished store


def _layout(ids_dtype: str | np.dtype, pairs: int, tokens: dict[str, int]) -> dict[str, tuple[np.dtype, int]]:
    """File name -> (dtype, number of items) of every array of a store."""
    shapes = {}
    for side in SIDES:
        shapes[f"{side}.ids"] = np.dtype(ids_dtype), tokens[side]
        shapes[f"{side}.offsets"] = OFFSET_DTYPE, pairs + 1
        shapes[f"{side}.lengths"] = LENGTH_DTYPE, pairs
    return shapes


class TokenStore:
    """A built token store, memory-mapped read-only (no copy per process; pickles as its path).

    Args:
        path: the store's folder, as returned by :func:`ensure_token_store`.

    Raises ValueError naming the folder to delete if the header is unreadable or a file's size
    differs from the one its header gives (a truncated or overwritten store).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.header = json.loads((self.path / HEADER).read_text())
            if self.header["format"] != FORMAT_VERSION:
                raise ValueError(f"format {self.header['format']}, expected {FORMAT_VERSION}")
            layout = _layout(self.header["token_dtype"], self.header["pairs"], self.header["tokens"])
            for name, (dtype, count) in layout.items():
                if (self.path / name).stat().st_size != dtype.itemsize * count:
                    raise ValueError(f"{name} has {(self.path / name).stat().st_size} bytes, its header gives "
                                     f"{dtype.itemsize * count}")
        except (OSError, KeyError, TypeError, ValueError) as error:
            raise ValueError(f"token store {self.path} is damaged ({error}); delete that folder and it will be "
                             "rebuilt") from error
        self.arrays = {name: np.memmap(self.path / name, dtype, "r", shape=(count,))
                       for name, (dtype, count) in layout.items()}

    def __len__(self) -> int:
        return self.header["pairs"]

    def __reduce__(self):
        return TokenStore, (self.path,)

    def lengths(self, side: str) -> np.ndarray:
        """Subwords of every sentence of ``side`` (``'src'`` or ``'tgt'``), (N,) uint32, memory-mapped."""
        return self.arrays[f"{side}.lengths"]

    def sentence(self, side: str, row: int) -> np.ndarray:
        """Subword ids of sentence ``row`` of ``side``, (length,) int32 (a copy)."""
        start, stop = self.arrays[f"{side}.offsets"][row:row + 2]
        return np.array(self.arrays[f"{side}.ids"][start:stop], np.int32)
