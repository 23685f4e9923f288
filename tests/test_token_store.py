"""The token store of parallel text: the samples and batches of direct encoding, one build, damage found."""
import multiprocessing
import os
import pickle
import shutil

import numpy as np
import pytest
import sentencepiece as spm
from mmengine.dataset import DefaultSampler

from attnbench.data import token_store
from attnbench.data.mini_corpus import write_mini_corpus
from attnbench.data.token_store import TokenStore, ensure_token_store, token_dtype
from attnbench.data.translation import ParallelTextDataset, TokenBucketBatchSampler, joint_sentencepiece

TOKENIZER = dict(train_files=["train.src", "train.tgt"], vocab_size=120, model_type="bpe")
TRAIN = dict(src="train.src", tgt="train.tgt")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("mini")
    write_mini_corpus(root, seed=0, train=400, valid=30, test=30)
    return root


@pytest.fixture
def fresh(corpus, tmp_path):
    """A copy of the corpus and its subword model without any store, for tests that change files."""
    for path in corpus.iterdir():
        if path.is_file() and path.suffix in (".src", ".tgt", ".model", ".vocab", ".json"):
            shutil.copy2(path, tmp_path)
    return tmp_path


def subword_model(root):
    return joint_sentencepiece([root / "train.src", root / "train.tgt"], 120, root, model_type="bpe")


def direct_encoding(root, split):
    """(lines, ids) of each side, encoded in memory as the dataset did before the store."""
    sp = spm.SentencePieceProcessor(model_file=str(subword_model(root)))
    sides = []
    for suffix in ("src", "tgt"):
        with open(root / f"{split}.{suffix}", encoding="utf-8", newline="\n") as f:
            lines = [line.strip() for line in f]
        sides.append((lines, [np.array(ids, np.int32) for ids in sp.encode(lines)]))
    return sides


def store_entries(root):
    """Names of the stores and temporary folders under ``root`` (lock files aside)."""
    return sorted(p.name for p in root.iterdir() if p.name.lstrip(".").startswith("tokens-") and p.is_dir())


class _Lengths:
    def __init__(self, lengths):
        self.lengths = np.asarray(lengths)

    def __len__(self):
        return len(self.lengths)


def batches(dataset):
    return list(TokenBucketBatchSampler(DefaultSampler(dataset, shuffle=True, seed=3), 16, 64, bucket_width=4))


def _within(low, high):
    """Rows whose two sides both have ``low`` to ``high`` subwords."""
    return lambda src, tgt: [i for i, (s, t) in enumerate(zip(src, tgt)) if low <= min(len(s), len(t))
                             and max(len(s), len(t)) <= high]


@pytest.mark.parametrize("split, kwargs, expected_rows", [
    ("train", dict(), lambda s, t: list(range(len(s)))),
    ("train", dict(filter_cfg=dict(min_length=10, max_length=16)), _within(10, 16)),
    ("train", dict(indices=[5, 1, 7, 300]), lambda s, t: [5, 1, 7, 300]),
    ("train", dict(filter_cfg=dict(max_length=20), indices=-3), lambda s, t: _within(1, 20)(s, t)[-3:]),
    ("test", dict(test_mode=True, filter_cfg=dict(max_length=16)), lambda s, t: list(range(len(s)))),
], ids=["all", "filtered", "indices", "filtered-then-last-3", "test-mode-keeps-all"])
def test_same_samples_and_batches_as_direct_encoding(corpus, split, kwargs, expected_rows):
    (_, src), (tgt_text, tgt) = direct_encoding(corpus, split)
    rows = expected_rows(src, tgt)
    dataset = ParallelTextDataset(str(corpus), dict(src=f"{split}.src", tgt=f"{split}.tgt"), TOKENIZER, **kwargs)
    assert len(dataset) == len(rows)
    for i, row in enumerate(rows):
        sample = dataset[i]
        expected = dict(src_ids=src[row], tgt_ids=tgt[row], sample_idx=i)
        if dataset.test_mode:
            expected["tgt_text"] = tgt_text[row]
        assert sample.keys() == expected.keys() and sample["sample_idx"] == i
        assert sample.get("tgt_text") == expected.get("tgt_text")
        for side in ("src_ids", "tgt_ids"):
            assert sample[side].dtype == np.int32 and np.array_equal(sample[side], expected[side])
    lengths = [max(len(src[r]), len(tgt[r])) + 1 for r in rows]
    assert dataset.lengths.dtype == np.int64 and dataset.lengths.tolist() == lengths
    assert batches(dataset) == batches(_Lengths(lengths))


def test_subsets_and_pickles_keep_reading_the_memory_map(corpus):
    dataset = ParallelTextDataset(str(corpus), TRAIN, TOKENIZER)
    subset = dataset.get_subset([3, 0])
    assert [s["src_ids"].tolist() for s in (subset[0], subset[1])] == [dataset[i]["src_ids"].tolist() for i in (3, 0)]
    store = dataset.store
    assert len(pickle.dumps(store)) < 1000  # its path: a worker maps the same files, no copy
    copied = pickle.loads(pickle.dumps(dataset))
    assert isinstance(copied.store.arrays["tgt.ids"], np.memmap)
    assert np.array_equal(copied[5]["tgt_ids"], dataset[5]["tgt_ids"])


@pytest.mark.parametrize("vocab_size, dtype", [(120, np.uint8), (256, np.uint8), (257, np.uint16),
                                               (65536, np.uint16), (65537, np.uint32)])
def test_ids_take_the_smallest_type_that_holds_the_vocabulary(vocab_size, dtype):
    assert token_dtype(vocab_size) == dtype


def test_the_store_holds_ids_offsets_and_lengths(corpus):
    (_, src), (_, tgt) = direct_encoding(corpus, "train")
    store = TokenStore(ensure_token_store(corpus / "train.src", corpus / "train.tgt", subword_model(corpus), corpus))
    assert store.header["token_dtype"] == "uint8" and store.header["tokens"] == dict(
        src=sum(map(len, src)), tgt=sum(map(len, tgt)))
    assert (store.path / "src.ids").stat().st_size == sum(map(len, src))  # one byte per subword
    assert store.arrays["tgt.offsets"].tolist() == np.cumsum([0] + [len(t) for t in tgt]).tolist()
    assert store.lengths("src").tolist() == [len(s) for s in src]


def _build_after(barrier, results, *args):
    barrier.wait()
    results.put(str(ensure_token_store(*args)))


def test_concurrent_builders_make_one_store(fresh):
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(3), context.Queue()
    args = (fresh / "train.src", fresh / "train.tgt", subword_model(fresh), fresh)
    builders = [context.Process(target=_build_after, args=(barrier, results, *args)) for _ in range(3)]
    for builder in builders:
        builder.start()
    paths = {results.get(timeout=300) for _ in builders}
    for builder in builders:
        builder.join()
    assert [b.exitcode for b in builders] == [0, 0, 0]
    assert len(paths) == 1 and store_entries(fresh) == [os.path.basename(*paths)]
    assert len(TokenStore(*paths)) == 400


def test_a_truncated_store_is_one_clear_error_until_deleted(fresh):
    store = ensure_token_store(fresh / "train.src", fresh / "train.tgt", subword_model(fresh), fresh)
    with open(store / "tgt.ids", "r+b") as f:
        f.truncate(10)
    with pytest.raises(ValueError, match=f"token store .*{store.name} is damaged \\(tgt.ids has 10 bytes, its header "
                                         "gives [0-9]+\\); delete that folder and it will be rebuilt"):
        ParallelTextDataset(str(fresh), TRAIN, TOKENIZER)
    shutil.rmtree(store)
    assert len(ParallelTextDataset(str(fresh), TRAIN, TOKENIZER)) == 400


def test_an_unfinished_store_is_rebuilt(fresh):
    args = (fresh / "train.src", fresh / "train.tgt", subword_model(fresh), fresh)
    store = ensure_token_store(*args)
    (store / "header.json").unlink()
    (store / "src.ids").write_bytes(b"")
    (fresh / f".{store.name}.tmp-killed").mkdir()  # left by a builder that was killed
    assert ensure_token_store(*args) == store
    assert len(TokenStore(store)) == 400 and store_entries(fresh) == [store.name]


def test_new_text_or_a_new_model_gets_a_new_store(fresh):
    model = subword_model(fresh)
    first = ensure_token_store(fresh / "train.src", fresh / "train.tgt", model, fresh)
    lines = (fresh / "train.tgt").read_text().splitlines()
    (fresh / "train.tgt").write_text("\n".join(["zabagiet", *lines[1:]]) + "\n")
    second = ensure_token_store(fresh / "train.src", fresh / "train.tgt", model, fresh)
    assert second != first and first.is_dir()
    sp = spm.SentencePieceProcessor(model_file=str(model))
    assert TokenStore(second).sentence("tgt", 0).tolist() == sp.encode("zabagiet")
    other = joint_sentencepiece([fresh / "train.src", fresh / "train.tgt"], 100, fresh, model_type="bpe")
    assert ensure_token_store(fresh / "train.src", fresh / "train.tgt", other, fresh) not in (first, second)


def test_a_file_that_changes_during_the_build_is_one_clear_error(fresh, monkeypatch):
    read = token_store.read_line_pairs

    def read_then_touch(source, target):
        yield from read(source, target)
        os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))

    monkeypatch.setattr(token_store, "read_line_pairs", read_then_touch)
    with pytest.raises(RuntimeError, match="train.src changed while its token store was being built"):
        ensure_token_store(fresh / "train.src", fresh / "train.tgt", subword_model(fresh), fresh)
    assert store_entries(fresh) == []
