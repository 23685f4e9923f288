"""Parallel text for translation: a joint sentencepiece model, the dataset, token-bucketed batches.

The real data path, the same for the mini corpus and for WMT-style files:

1. :func:`joint_sentencepiece` trains one subword model (Kudo and Richardson 2018,
   https://arxiv.org/abs/1808.06226) on the training text of both languages and caches it under a
   name that carries a digest of that text and of the options, so new text gets a new model.
2. :class:`ParallelTextDataset` (an mmengine ``BaseDataset``) reads a source and a target file, one
   sentence per line, through a token store (:mod:`attnbench.data.token_store`): the pairs are
   encoded once into files beside the data and memory-mapped by every process; its
   ``metainfo['tokenizer']`` names the subword model, which the BLEU metric uses to detokenize.
3. :class:`TokenBucketBatchSampler` groups the sampler's indices into batches of similar length
   holding at most ``max_tokens`` padded tokens, and :func:`collate_translation` pads them.

Ids: ``PAD_ID = 0``, ``UNK_ID = 1``, ``BOS_ID = 2``, ``EOS_ID = 3``. The source gets EOS appended; the
target BOS prepended and EOS appended (decoder input = all but the last, label = all but the first).
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import sentencepiece as spm
import torch
from mmengine.dataset import BaseDataset
from mmengine.dataset.base_dataset import force_full_init
from torch.utils.data import Sampler

from .mini_corpus import ensure_mini_corpus
from .token_store import SIDES, TokenStore, _digest, _run_on_main_process, ensure_token_store, read_line_pairs

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


def joint_sentencepiece(
    train_files: Sequence[str | Path],
    vocab_size: int,
    model_dir: str | Path,
    model_type: str = "unigram",
    character_coverage: float = 1.0,
    input_sentence_size: int = 0,
) -> Path:
    """Path of the subword model trained on ``train_files`` (both languages), training it on first use.

    The model is ``model_dir/spm-joint-<vocab_size>-<digest>.model``; ``input_sentence_size > 0``
    trains on that many randomly drawn lines (full-scale corpora), 0 on all of them.
    """
    files = [Path(f) for f in train_files]
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"tokenizer training file not found: {path}")
    options = dict(vocab_size=vocab_size, model_type=model_type, character_coverage=character_coverage,
                   input_sentence_size=input_sentence_size)
    model = Path(model_dir) / f"spm-joint-{vocab_size}-{_digest(files, options)}.model"
    if not model.is_file():
        _run_on_main_process(_train_sentencepiece, files, model, options)
    return model


def _train_sentencepiece(files: list[Path], model: Path, options: dict) -> None:
    model.parent.mkdir(parents=True, exist_ok=True)
    prefix = model.with_name(f"{model.stem}.tmp{os.getpid()}")
    try:
        spm.SentencePieceTrainer.train(
            input=[str(f) for f in files], model_prefix=str(prefix), pad_id=PAD_ID, unk_id=UNK_ID,
            bos_id=BOS_ID, eos_id=EOS_ID, shuffle_input_sentence=True, num_threads=os.cpu_count() or 1,
            minloglevel=2, **options)
    except RuntimeError as error:
        raise ValueError(f"sentencepiece could not train on {[str(f) for f in files]}: {error}") from error
    Path(f"{prefix}.vocab").replace(model.with_suffix(".vocab"))
    Path(f"{prefix}.model").replace(model)  # last: the .model file marks a finished training


class ParallelTextDataset(BaseDataset):
    """Sentence pairs from a source and a target file, as subword ids of one joint sentencepiece model.

    Args:
        data_root: folder of the files (relative paths below are joined to it).
        data_prefix: ``dict(src=..., tgt=...)``, the two files of this split.
        tokenizer: arguments of :func:`joint_sentencepiece` except ``model_dir`` (``data_root``):
            ``train_files`` (the training split's two files), ``vocab_size``, ...
        filter_cfg: ``dict(min_length=1, max_length=None)`` subwords per side; applied only when
            training (``test_mode=False``), so evaluation always scores every reference.
        test_mode: evaluation split: keeps every pair and its reference text (``tgt_text``).
        **kwargs: the rest of ``BaseDataset``'s arguments (``indices``, ``lazy_init``, ...).

    Every sample is ``dict(src_ids, tgt_ids, sample_idx)``, plus ``tgt_text`` in test mode. The ids
    are read from the memory-mapped token store, so ``data_list`` holds the numbers of the kept store
    rows (an int64 array) rather than dicts, and nothing is serialized.
    """

    def __init__(self, data_root: str, data_prefix: dict, tokenizer: dict, filter_cfg: dict | None = None,
                 test_mode: bool = False, **kwargs):
        if set(data_prefix) != {"src", "tgt"}:
            raise ValueError(f"data_prefix must be dict(src=..., tgt=...), got {dict(data_prefix)}")
        tokenizer = dict(tokenizer)
        train_files = [Path(data_root) / f for f in tokenizer.pop("train_files")]
        self.spm_model = joint_sentencepiece(train_files, model_dir=data_root, **tokenizer)
        self.store: TokenStore | None = None
        self._references: list[str] | None = None  # the target lines, in test mode
        super().__init__(data_root=data_root, data_prefix=data_prefix, filter_cfg=filter_cfg, test_mode=test_mode,
                         serialize_data=False, **kwargs)
        self._metainfo["tokenizer"] = str(self.spm_model)  # not via `metainfo`, which would read the file

    def load_data_list(self) -> np.ndarray:
        files = self.data_prefix["src"], self.data_prefix["tgt"]
        self.store = TokenStore(ensure_token_store(*files, self.spm_model, self.data_root))
        if self.test_mode:
            self._references = [target for _, target in read_line_pairs(*files)]
        return np.arange(len(self.store))

    def filter_data(self) -> np.ndarray:
        if self.test_mode:
            return self.data_list
        cfg = {"min_length": 1, "max_length": None, **(self.filter_cfg or {})}
        if set(cfg) != {"min_length", "max_length"}:
            raise ValueError(f"filter_cfg takes min_length and max_length, got {dict(self.filter_cfg)}")
        low, high = cfg["min_length"], cfg["max_length"] or float("inf")
        src, tgt = (self.store.lengths(side)[self.data_list] for side in SIDES)
        kept = self.data_list[(np.minimum(src, tgt) >= low) & (np.maximum(src, tgt) <= high)]
        if not len(kept):
            raise ValueError(f"no sentence pair of {self.data_prefix} has {low} to {high} subwords per side")
        return kept

    def _get_unserialized_subset(self, indices: int | Sequence[int]) -> np.ndarray:
        """``data_list`` at ``indices``, or its first (last, if negative) ``indices`` rows, as in mmengine."""
        if isinstance(indices, int):
            return self.data_list[:indices] if indices >= 0 else self.data_list[indices:]
        return self.data_list[np.asarray(indices, np.int64)]

    @force_full_init
    def get_data_info(self, idx: int) -> dict:
        row = int(self.data_list[idx])
        info = {f"{side}_ids": self.store.sentence(side, row) for side in SIDES}
        if self.test_mode:
            info["tgt_text"] = self._references[row]
        info["sample_idx"] = idx if idx >= 0 else len(self) + idx
        return info

    @property
    def lengths(self) -> np.ndarray:
        """Padded length of each sample, ``max(source + EOS, BOS + target)``, (N,) int64."""
        self.full_init()
        src, tgt = (self.store.lengths(side)[self.data_list] for side in SIDES)
        return np.maximum(src, tgt).astype(np.int64) + 1


class _WrittenOnFirstUse(ParallelTextDataset):
    """:class:`ParallelTextDataset` whose corpus its class writes under ``data_root`` before reading it
    (``generate_data``, which the config check and the sweep also look for:
    attnbench.mm.run_setup.generating_dataset); ``generate`` holds the writer's arguments."""

    def __init__(self, data_root: str, generate: dict | None = None, **kwargs):
        self.generate_data(data_root, generate)
        super().__init__(data_root=data_root, **kwargs)

    @staticmethod
    def generate_data(data_root: str, generate: dict | None = None) -> None:
        raise NotImplementedError


class MiniCorpusDataset(_WrittenOnFirstUse):
    """The synthetic mini corpus, written under ``data_root`` on first use.

    Args:
        generate: arguments of :func:`attnbench.data.mini_corpus.ensure_mini_corpus` (seed, split
            sizes; its defaults when left out); every dataset on one ``data_root`` must give the same.
        Others: as :class:`ParallelTextDataset`.
    """

    @staticmethod
    def generate_data(data_root: str, generate: dict | None = None) -> None:
        """Write the corpus into ``data_root`` unless it is there (``generate``: as the dataset's)."""
        _run_on_main_process(ensure_mini_corpus, data_root, **(generate or {}))


class L10nCorpusDataset(_WrittenOnFirstUse):
    """Debian's English-German translation catalogues, unpacked under ``data_root`` on first use from the
    committed corpus (:func:`attnbench.data.l10n_corpus.unpack_committed`; no network), or built from
    Debian's archive with ``generate`` (:func:`attnbench.data.l10n_corpus.build_corpus`; needs ``apt-get``).

    Args:
        generate: arguments of ``build_corpus`` (``lang``, ``packages``, ``debs``, ...) to build another
            corpus than the committed one; every dataset on one ``data_root`` must give the same.
        Others: as :class:`ParallelTextDataset`.
    """

    @staticmethod
    def generate_data(data_root: str, generate: dict | None = None) -> None:
        """Write the corpus into ``data_root`` unless it holds one: its ``manifest.json``, or parallel text of
        your own (``train.en``; ``--data-root nmt-l10n=FOLDER`` with ``train/valid/test.{en,de}``)."""
        from .l10n_corpus import build_corpus, unpack_committed

        if not any((Path(data_root) / name).is_file() for name in ("manifest.json", "train.en")):
            if generate:
                _run_on_main_process(build_corpus, data_root, **generate)
            else:
                _run_on_main_process(unpack_committed, data_root)


class TokenBucketBatchSampler(Sampler[list[int]]):
    """Batches of similar-length samples with at most ``max_tokens`` padded tokens per side.

    Indices are taken in the order of ``sampler`` (so shuffling, seeding and sharding are the
    sampler's) and dropped into buckets of ``bucket_width`` lengths; a bucket is emitted as a batch
    when one more sample would exceed ``max_tokens`` padded tokens (``batch length x samples``) or
    ``batch_size`` samples. A sample longer than ``max_tokens`` forms a batch of its own. Works with
    finite and infinite samplers; leftovers of a finite one end the epoch (unless ``drop_last``).

    Args:
        sampler: index sampler over a dataset with per-sample ``lengths`` (:class:`ParallelTextDataset`).
        batch_size: most samples per batch.
        max_tokens: most padded tokens per batch and side.
        bucket_width: lengths per bucket.
        drop_last: drop the partly filled buckets at the end of a finite sampler.
    """

    def __init__(self, sampler: Sampler, batch_size: int, max_tokens: int, bucket_width: int = 8,
                 drop_last: bool = False):
        for name, value in dict(batch_size=batch_size, max_tokens=max_tokens, bucket_width=bucket_width).items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        dataset = getattr(sampler, "dataset", None)
        if not hasattr(dataset, "lengths"):
            raise ValueError("TokenBucketBatchSampler needs a sampler over a dataset with per-sample `lengths` "
                             f"(e.g. attnbench.ParallelTextDataset), got {type(dataset).__name__}")
        self.sampler = sampler
        self.lengths = dataset.lengths
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.bucket_width = bucket_width
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        buckets: dict[int, list[int]] = {}
        longest: dict[int, int] = {}
        for index in self.sampler:
            length = int(self.lengths[index])
            key = length // self.bucket_width
            bucket = buckets.setdefault(key, [])
            grown = max(longest.get(key, 0), length)
            if bucket and (grown * (len(bucket) + 1) > self.max_tokens or len(bucket) == self.batch_size):
                yield bucket
                bucket = buckets[key] = []
                grown = length
            bucket.append(index)
            longest[key] = grown
        if not self.drop_last:
            yield from (bucket for bucket in buckets.values() if bucket)

    def __len__(self) -> int:
        """An estimate (the batches depend on the order): the sampler's tokens over ``max_tokens``."""
        tokens = self.lengths.mean() * len(self.sampler)
        return max(1, int(np.ceil(tokens / self.max_tokens)))


def _pad(sequences: list[torch.Tensor], pad_id: int) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence(sequences, batch_first=True, padding_value=pad_id)


def collate_translation(batch: list[dict], pad_id: int = PAD_ID) -> dict:
    """Samples -> ``dict(src_tokens=(B, S), tgt_tokens=(B, T), data_samples=[...])``, right-padded.

    ``src_tokens`` = source + EOS; ``tgt_tokens`` = BOS + target + EOS; ``data_samples`` keeps each
    sample's ``sample_idx`` and, in test mode, ``tgt_text``.
    """
    bos, eos = torch.tensor([BOS_ID]), torch.tensor([EOS_ID])
    src = [torch.cat([torch.from_numpy(s["src_ids"]).long(), eos]) for s in batch]
    tgt = [torch.cat([bos, torch.from_numpy(s["tgt_ids"]).long(), eos]) for s in batch]
    samples = [{k: v for k, v in s.items() if k not in ("src_ids", "tgt_ids")} for s in batch]
    return dict(src_tokens=_pad(src, pad_id), tgt_tokens=_pad(tgt, pad_id), data_samples=samples)
