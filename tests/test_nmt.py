"""The translation model, its data path, BLEU and one Runner run (tiny sizes, CPU, ~1 min)."""
import filecmp
import json
import math

import numpy as np
import pytest
import sacrebleu
import sentencepiece as spm
import torch
from mmengine.config import Config
from mmengine.dataset import DefaultSampler
from mmengine.runner import Runner

import attnbench.mm  # noqa: F401  (registers the translation classes)
from attnbench.data.mini_corpus import ensure_mini_corpus, generate_pairs, write_mini_corpus
from attnbench.data.translation import (
    BOS_ID, EOS_ID, PAD_ID, ParallelTextDataset, TokenBucketBatchSampler, collate_translation, joint_sentencepiece)
from attnbench.mm.nmt import CorpusBLEU
from attnbench.models import transformer_nmt
from attnbench.models.transformer_nmt import MECHANISMS, Mechanism, TransformerNMT, build_slot
from attnbench.variants import SLOTS

VOCAB = 40
# Options that make every term matter: all four factors, areas of 2, short kernels.
OPTIONS = {"generalized": dict(attention_type="1111"), "area": dict(max_area_width=2),
           "lightweight": dict(kernel_size=3), "dynamic": dict(kernel_size=3), "deformable": dict(kernel_size=3)}
DECODER_MECHANISMS = sorted(n for n, m in MECHANISMS.items() if "dec-self" in m.slots)
SLOT_MECHANISMS = [(slot, name) for slot in SLOTS for name, m in sorted(MECHANISMS.items()) if slot in m.slots]


def slot_cfg(name):
    return dict(type=name, **OPTIONS.get(name, {}))


def tiny_model(encoder="standard", decoder="standard", cross="standard", layers=1, pre_norm=False, dropout=0.0,
               randomize=True, **kwargs):
    """A width-16 model; ``randomize`` draws every parameter (offsets, kernels) away from its init."""
    model = TransformerNMT(VOCAB, 16, 2, 32, layers, layers, dropout=dropout, pre_norm=pre_norm,
                           encoder_self_attention=slot_cfg(encoder), decoder_self_attention=slot_cfg(decoder),
                           cross_attention=slot_cfg(cross), **kwargs)
    if randomize:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.3 * torch.randn_like(p))
    return model.double().eval()


def tokens(lengths, vocab=VOCAB):
    """Right-padded (B, max + 1) rows of random ids ending with EOS."""
    rows = torch.full((len(lengths), max(lengths) + 1), PAD_ID)
    for i, n in enumerate(lengths):
        rows[i, :n] = torch.randint(4, vocab, (n,))
        rows[i, n] = EOS_ID
    return rows


def with_bos(target):
    return torch.cat([torch.full((target.shape[0], 1), BOS_ID), target], 1)


# -- model ------------------------------------------------------------------------------------


@pytest.mark.parametrize("slot, name", SLOT_MECHANISMS)
def test_every_slot_and_mechanism_trains_a_step(slot, name):
    model = TransformerNMT(VOCAB, 16, 2, 32, 1, 1, **{SLOTS[slot].argument: slot_cfg(name)})
    src, tgt = tokens([5, 3]), with_bos(tokens([4, 6]))
    slot_module = {"enc-self": model.encoder_layers[0].self_attn, "dec-self": model.decoder_layers[0].self_attn,
                   "enc-dec": model.decoder_layers[0].cross_attn}[slot]
    before = [p.detach().clone() for p in slot_module.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(src, tgt, mode="loss")["loss"]
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss) and loss > 0
    assert any(not torch.equal(b, p) for b, p in zip(before, slot_module.parameters()))


def test_standard_slot_is_multi_head_attention():
    slot = build_slot("dec-self", dict(type="standard"), 16, 4, 0.0).double()
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).double()
    attention = slot.attention
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([attention.q_proj.weight, attention.k_proj.weight, attention.v_proj.weight]))
        mha.in_proj_bias.copy_(torch.cat([attention.q_proj.bias, attention.k_proj.bias, attention.v_proj.bias]))
        mha.out_proj.load_state_dict(attention.out_proj.state_dict())
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    torch.testing.assert_close(slot.mix(x, None, 6), mha(x, x, x, attn_mask=future, need_weights=False)[0])


@pytest.mark.parametrize("name", DECODER_MECHANISMS)
def test_decoder_is_causal(name):
    model = tiny_model(decoder=name, cross="generalized", layers=2)
    src, tgt = tokens([5, 7]), with_bos(tokens([6, 6]))
    logits = model(src, tgt, mode="tensor")
    for t in range(1, tgt.shape[1] - 1):
        changed = tgt.clone()
        changed[:, t:] = torch.randint(4, VOCAB, changed[:, t:].shape)
        # outputs before step t read only targets before t
        torch.testing.assert_close(model(src, changed, mode="tensor")[:, :t], logits[:, :t], rtol=0, atol=1e-12)
    assert not torch.allclose(model(src, changed, mode="tensor"), logits)


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_source_padding_does_not_change_outputs(name):
    model = tiny_model(encoder=name)
    src, tgt = tokens([4, 8]), with_bos(tokens([5, 5]))
    alone = model(src[:1, :5], tgt[:1], mode="tensor")
    torch.testing.assert_close(model(src, tgt, mode="tensor")[:1], alone, rtol=0, atol=1e-12)


INCREMENTAL = [(name, "generalized") for name in DECODER_MECHANISMS] + [("standard", "area"), ("standard", "standard")]


@pytest.mark.parametrize("pre_norm", [False, True])
@pytest.mark.parametrize("decoder, cross", INCREMENTAL)
def test_incremental_decoding_matches_teacher_forcing(decoder, cross, pre_norm):
    model = tiny_model(decoder=decoder, cross=cross, layers=2, pre_norm=pre_norm)
    src, tgt = tokens([5, 7]), with_bos(tokens([6, 4]))
    memory, memory_padding_mask = model.encode(src)
    cache, steps = None, []
    for t in range(tgt.shape[1] - 1):
        step_logits, cache = model.decode(tgt[:, t:t + 1], memory, memory_padding_mask, cache)
        steps.append(step_logits)
    torch.testing.assert_close(torch.cat(steps, 1), model(src, tgt, mode="tensor"), rtol=0, atol=1e-10)


@pytest.mark.parametrize("options", [dict(window=1), dict(score="additive"), dict(score="bilinear", hard=2)])
def test_incremental_decoding_matches_teacher_forcing_with_variant_parameters(options, monkeypatch):
    """A window, another score function or hard attention in the decoder and the cross slot."""
    monkeypatch.setitem(OPTIONS, "generalized", dict(attention_type="1111", **options))
    test_incremental_decoding_matches_teacher_forcing("generalized", "generalized", pre_norm=False)


def test_greedy_equals_beam_size_one():
    model = tiny_model(layers=2, decode_cfg=dict(max_len_b=6))
    src = tokens([3, 6, 5, 2])
    greedy, _ = model.greedy_search(src)
    beam, _ = model.beam_search(src, beam_size=1)
    assert beam == greedy
    assert any(len(h) > 1 for h in greedy)


def test_beam_search_scores_at_least_greedy():
    model = tiny_model(layers=2, decode_cfg=dict(max_len_b=6))
    src = tokens([3, 6, 5, 2, 7, 4])
    greedy, greedy_scores = model.greedy_search(src)
    beam, beam_scores = model.beam_search(src, beam_size=4, len_penalty=0.0)  # scores are log p(y | x)
    torch.testing.assert_close(greedy_scores, model.score(src, greedy), rtol=0, atol=1e-5)
    torch.testing.assert_close(beam_scores, model.score(src, beam), rtol=0, atol=1e-5)
    assert (beam_scores >= greedy_scores - 1e-6).all()
    assert beam != greedy  # the wider search found something else for at least one sentence


def test_predict_mode_and_generate_follow_decode_cfg():
    model = tiny_model(decode_cfg=dict(beam_size=1, max_len_b=4))
    src, tgt = tokens([3, 5]), with_bos(tokens([2, 2]))
    out = model(src, tgt, [dict(tgt_text="a"), dict(tgt_text="b")], mode="predict")
    assert [o["tgt_text"] for o in out] == ["a", "b"]
    assert [o["pred_tokens"] for o in out] == model.greedy_search(src)[0]
    assert all(len(o["pred_tokens"]) <= 4 + 1.2 * src.shape[1] for o in out)


@pytest.mark.parametrize("slot, cfg, match", [
    ("enc-self", dict(type="transformer-xl"), "enc-self slot: unknown mechanism 'transformer-xl'"),
    ("enc-dec", dict(type="dynamic"), "enc-dec slot needs attention from the target .* 'dynamic' cannot"),
    ("enc-dec", dict(type="deformable"), "choose one of \\['area', 'generalized', 'standard'\\]"),
    ("dec-self", dict(), "dec-self slot: unknown mechanism None"),
])
def test_bad_slot_config(slot, cfg, match):
    with pytest.raises(ValueError, match=match):
        build_slot(slot, cfg, 16, 2, 0.0)


def test_a_mechanism_that_cannot_be_causal_is_refused_in_the_decoder(monkeypatch):
    bidirectional = Mechanism(MECHANISMS["standard"].build, frozenset({"enc-self", "enc-dec"}))
    monkeypatch.setitem(transformer_nmt.MECHANISMS, "bidirectional", bidirectional)
    build_slot("enc-self", dict(type="bidirectional"), 16, 2, 0.0)
    with pytest.raises(ValueError, match="dec-self slot needs causal self-attention .* 'bidirectional' cannot"):
        TransformerNMT(VOCAB, 16, 2, 32, 1, 1, decoder_self_attention=dict(type="bidirectional"))


@pytest.mark.parametrize("kwargs, match", [
    (dict(decode_cfg=dict(beam=4)), "decode_cfg takes"),
    (dict(decode_cfg=dict(beam_size=0)), "beam_size must be a positive integer"),
    (dict(label_smoothing=1.0), "label_smoothing"),
    (dict(vocab_size=3), "vocab_size"),
])
def test_bad_model_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TransformerNMT(**{"vocab_size": VOCAB, "embed_dim": 16, "num_heads": 2, **kwargs})


def test_loss_ignores_target_padding():
    model = tiny_model(label_smoothing=0.1)
    src, tgt = tokens([4]), with_bos(tokens([5]))
    padded = torch.cat([tgt, torch.full((1, 3), PAD_ID)], 1)
    torch.testing.assert_close(model(src, padded, mode="loss")["loss"], model(src, tgt, mode="loss")["loss"])


# -- data -------------------------------------------------------------------------------------


def test_mini_corpus_is_deterministic_and_splits_are_disjoint(tmp_path):
    assert generate_pairs(50, seed=3) == generate_pairs(50, seed=3) != generate_pairs(50, seed=4)
    first = write_mini_corpus(tmp_path / "a", seed=3, train=200, valid=20, test=30)
    second = write_mini_corpus(tmp_path / "b", seed=3, train=200, valid=20, test=30)
    for name, path in first.items():
        assert filecmp.cmp(path, second[name], shallow=False)
    lines = {name: path.read_text().splitlines() for name, path in first.items()}
    assert [len(lines[f"{s}.src"]) for s in ("train", "valid", "test")] == [200, 20, 30]
    assert all(len(lines[f"{s}.src"]) == len(lines[f"{s}.tgt"]) for s in ("train", "valid", "test"))
    assert not set(lines["train.src"]) & (set(lines["valid.src"]) | set(lines["test.src"]))


def test_mini_corpus_needs_translation_not_copying(tmp_path):
    files = write_mini_corpus(tmp_path, seed=0, train=10, valid=10, test=300)
    sources, references = files["test.src"].read_text().splitlines(), files["test.tgt"].read_text().splitlines()
    assert sacrebleu.corpus_bleu(sources, [references]).score < 5  # only names are copied unchanged
    # The verb moves to the end: the last target word always carries a verb suffix.
    assert all(r.split()[-1].endswith(("et", "un", "ir", "oran")) for r in references)


def test_ensure_mini_corpus_reuses_or_rewrites(tmp_path):
    files = ensure_mini_corpus(tmp_path, seed=1, train=30, valid=5, test=5)
    stamp = files["train.src"].stat().st_mtime_ns
    ensure_mini_corpus(tmp_path, seed=1, train=30, valid=5, test=5)
    assert files["train.src"].stat().st_mtime_ns == stamp
    ensure_mini_corpus(tmp_path, seed=2, train=30, valid=5, test=5)
    assert files["train.src"].read_text() != write_mini_corpus(tmp_path / "x", seed=1, train=30, valid=5,
                                                               test=5)["train.src"].read_text()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("mini")
    write_mini_corpus(root, seed=0, train=400, valid=30, test=30)
    return root


TOKENIZER = dict(train_files=["train.src", "train.tgt"], vocab_size=120, model_type="bpe")


def test_joint_sentencepiece_is_cached_and_round_trips(corpus):
    files = [corpus / "train.src", corpus / "train.tgt"]
    model = joint_sentencepiece(files, 120, corpus, model_type="bpe")
    stamp = model.stat().st_mtime_ns
    assert joint_sentencepiece(files, 120, corpus, model_type="bpe") == model and model.stat().st_mtime_ns == stamp
    assert joint_sentencepiece(files[:1], 120, corpus, model_type="bpe") != model  # other text, other model
    sp = spm.SentencePieceProcessor(model_file=str(model))
    assert (sp.pad_id(), sp.bos_id(), sp.eos_id(), sp.get_piece_size()) == (PAD_ID, BOS_ID, EOS_ID, 120)
    lines = (corpus / "valid.src").read_text().splitlines() + (corpus / "valid.tgt").read_text().splitlines()
    assert sp.decode(sp.encode(lines)) == lines


def test_joint_sentencepiece_too_large_vocabulary_is_one_clear_error(corpus):
    with pytest.raises(ValueError, match="sentencepiece could not train .*Vocabulary size too high"):
        joint_sentencepiece([corpus / "valid.src"], 5000, corpus)


def test_dataset_reads_filters_and_keeps_references(corpus):
    files = dict(src="train.src", tgt="train.tgt")
    limit = int(np.median(ParallelTextDataset(str(corpus), files, TOKENIZER).lengths))
    train = ParallelTextDataset(str(corpus), files, TOKENIZER, filter_cfg=dict(max_length=limit))
    assert 0 < len(train) < 400
    assert all(max(len(d["src_ids"]), len(d["tgt_ids"])) <= limit for d in map(train.get_data_info, range(len(train))))
    assert "tgt_text" not in train[0]
    test = ParallelTextDataset(str(corpus), dict(src="test.src", tgt="test.tgt"), TOKENIZER, test_mode=True,
                               filter_cfg=dict(max_length=limit))
    references = (corpus / "test.tgt").read_text().splitlines()
    assert len(test) == 30 and [test[i]["tgt_text"] for i in range(30)] == references
    sp = spm.SentencePieceProcessor(model_file=test.metainfo["tokenizer"])
    assert sp.decode(test[0]["tgt_ids"].tolist()) == references[0]
    assert test.lengths[0] == max(len(test[0]["src_ids"]), len(test[0]["tgt_ids"])) + 1


@pytest.mark.parametrize("src, tgt, error, match", [
    ("short.src", "train.tgt", ValueError, "misaligned parallel text: .*short.src has 3 lines, .*train.tgt has 400"),
    ("empty.src", "train.tgt", ValueError, "parallel text file .*empty.src is empty"),
    ("missing.src", "train.tgt", FileNotFoundError, "parallel text file not found: .*missing.src"),
])
def test_bad_parallel_files_are_one_clear_error(corpus, src, tgt, error, match):
    (corpus / "short.src").write_text("a\nb\nc\n")
    (corpus / "empty.src").write_text("\n\n")
    with pytest.raises(error, match=match):
        ParallelTextDataset(str(corpus), dict(src=src, tgt=tgt), TOKENIZER)


class _Lengths:
    def __init__(self, lengths):
        self.lengths = np.asarray(lengths)

    def __len__(self):
        return len(self.lengths)


def test_token_buckets_cover_every_index_within_the_budget():
    lengths = np.random.default_rng(0).integers(2, 40, size=500)
    sampler = DefaultSampler(_Lengths(lengths), shuffle=True, seed=0)
    batches = list(TokenBucketBatchSampler(sampler, batch_size=32, max_tokens=256, bucket_width=8))
    assert sorted(i for b in batches for i in b) == list(range(500))
    for batch in batches:
        assert len(batch) <= 32 and len(set(lengths[batch] // 8)) == 1
        assert len(batch) == 1 or lengths[batch].max() * len(batch) <= 256
    assert list(TokenBucketBatchSampler(sampler, 32, 256, 8)) == batches  # the sampler's seed fixes them


def test_token_bucket_sampler_needs_lengths():
    with pytest.raises(ValueError, match="per-sample `lengths`"):
        TokenBucketBatchSampler(DefaultSampler(list(range(4)), shuffle=False), batch_size=2, max_tokens=8)


def test_collate_pads_and_adds_bos_eos():
    batch = [dict(src_ids=np.array([7, 8], np.int32), tgt_ids=np.array([9], np.int32), sample_idx=0),
             dict(src_ids=np.array([5], np.int32), tgt_ids=np.array([6, 6, 6], np.int32), sample_idx=1)]
    out = collate_translation(batch)
    assert out["src_tokens"].tolist() == [[7, 8, EOS_ID], [5, EOS_ID, PAD_ID]]
    assert out["tgt_tokens"].tolist() == [[BOS_ID, 9, EOS_ID, PAD_ID, PAD_ID], [BOS_ID, 6, 6, 6, EOS_ID]]
    assert out["data_samples"] == [dict(sample_idx=0), dict(sample_idx=1)]


# -- BLEU and the Runner ----------------------------------------------------------------------


def test_corpus_bleu_and_chrf_match_sacrebleu(corpus):
    model = joint_sentencepiece([corpus / "train.src", corpus / "train.tgt"], 120, corpus, model_type="bpe")
    sp = spm.SentencePieceProcessor(model_file=str(model))
    references = (corpus / "test.tgt").read_text().splitlines()
    hypotheses = [" ".join(r.split()[::-1]) if i % 3 else r for i, r in enumerate(references)]
    metric = CorpusBLEU()
    metric.dataset_meta = dict(tokenizer=str(model))
    metric.process({}, [dict(pred_tokens=sp.encode(h), tgt_text=r) for h, r in zip(hypotheses, references)])
    expected = sacrebleu.corpus_bleu(hypotheses, [references]).score
    expected_chrf = sacrebleu.corpus_chrf(hypotheses, [references]).score
    assert 0 < expected < expected_chrf < 100
    assert metric.evaluate(len(references)) == {"translation/BLEU": pytest.approx(expected, abs=1e-9),
                                                "translation/chrF": pytest.approx(expected_chrf, abs=1e-9)}


def test_corpus_bleu_needs_references_and_a_tokenizer():
    metric = CorpusBLEU()
    with pytest.raises(ValueError, match="test_mode=True"):
        metric.process({}, [dict(pred_tokens=[5])])
    metric.process({}, [dict(pred_tokens=[5], tgt_text="x")])
    with pytest.raises(ValueError, match="metainfo\\['tokenizer'\\]"):
        metric.compute_metrics(metric.results)


def tiny_mini_config(tmp_path, sentences: int, max_iters: int, val_interval: int) -> Config:
    """The mini config on a 300-pair mini corpus (``sentences`` in valid and test) with a width-16 model."""
    cfg = Config.fromfile("configs/translation/transformer-mini_mini-corpus.py")
    for loader in (cfg.train_dataloader, cfg.val_dataloader, cfg.test_dataloader):
        loader.dataset.update(data_root=str(tmp_path / "data"),
                              generate=dict(seed=0, train=300, valid=sentences, test=sentences),
                              tokenizer=dict(loader.dataset.tokenizer, vocab_size=100))
    cfg.model.update(vocab_size=100, embed_dim=16, num_heads=2, ffn_dim=32, num_encoder_layers=1,
                     num_decoder_layers=1, decode_cfg=dict(max_len_b=3))
    cfg.train_cfg.update(max_iters=max_iters, val_interval=val_interval)
    cfg.work_dir = str(tmp_path / "work")
    return cfg


def test_runner_trains_the_mini_config_and_validation_reports_bleu(tmp_path):
    runner = Runner.from_cfg(tiny_mini_config(tmp_path, 16, 4, 4))
    runner.train()
    bleu = runner.message_hub.get_scalar("val/translation/BLEU").current()
    assert 0 <= bleu <= 100 and math.isfinite(bleu)
    assert (tmp_path / "data" / "train.src").is_file()  # the corpus was generated on first use
    assert list((tmp_path / "data").glob("tokens-train.src-train.tgt-*/header.json"))  # and encoded into a store


def test_a_learning_curve_records_each_validation_with_its_training_minutes(tmp_path):
    cfg = tiny_mini_config(tmp_path, 8, 4, 2)
    cfg.custom_hooks = [dict(type="attnbench.LearningCurveHook")]
    Runner.from_cfg(cfg).train()
    points = [json.loads(line) for line in (tmp_path / "work" / "curve.jsonl").read_text().splitlines()]
    assert [p["iter"] for p in points] == [2, 4]
    assert 0 < points[0]["train_minutes"] < points[1]["train_minutes"] and all(p["val_minutes"] > 0 for p in points)
    assert all(0 <= p["translation/BLEU"] <= 100 and 0 <= p["translation/chrF"] <= 100 for p in points)
    from attnbench.analysis.curves import curve_table, read_curves

    table = curve_table(read_curves(tmp_path))
    assert table.loc[0, "width"] == 16 and table.loc[0, "vocab"] == 100 and table.loc[0, "curve"] == "work"


def test_the_model_builds_every_translation_token_of_the_catalogue_in_the_slots_it_names():
    from attnbench.variants import GENERALIZED_ATTENTION, TRANSLATION_MECHANISMS
    from attnbench.variants import MECHANISMS as CATALOGUE

    assert set(MECHANISMS) == {"standard", "generalized", *TRANSLATION_MECHANISMS}
    for name in TRANSLATION_MECHANISMS:
        assert MECHANISMS[name].slots == CATALOGUE[name].slots
    assert MECHANISMS["generalized"].slots == GENERALIZED_ATTENTION.slots == frozenset(SLOTS)
