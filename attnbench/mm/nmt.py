"""Translation on mmengine: the model, data, batching and BLEU registered under ``attnbench.``.

    model = dict(type='attnbench.TransformerNMT', ...)
    dataset = dict(type='attnbench.ParallelTextDataset' | 'attnbench.MiniCorpusDataset' | 'attnbench.L10nCorpusDataset', ...)
    batch_sampler = dict(type='attnbench.TokenBucketBatchSampler', max_tokens=...)
    collate_fn = dict(type='attnbench.collate_translation')
    val_evaluator = dict(type='attnbench.CorpusBLEU')

BLEU (Papineni et al. 2002) is sacreBLEU's corpus BLEU (Post 2018, https://arxiv.org/abs/1804.08771)
of the detokenized hypotheses against the raw reference lines, so it is comparable across
tokenizations; chrF (Popović 2015) is sacreBLEU's character n-gram F-score (n <= 6, beta 2) of the same
lines, which still ranks systems where BLEU is low. The subword model comes from the dataset's
``metainfo['tokenizer']``.
"""
from __future__ import annotations

from collections.abc import Sequence

import sacrebleu
import sentencepiece as spm
from mmengine.evaluator import BaseMetric

from attnbench.data.translation import (
    L10nCorpusDataset, MiniCorpusDataset, ParallelTextDataset, TokenBucketBatchSampler, collate_translation)
from attnbench.models.transformer_nmt import TransformerNMT

from .registry import DATA_SAMPLERS, DATASETS, FUNCTIONS, METRICS, MODELS


class CorpusBLEU(BaseMetric):
    """sacreBLEU corpus BLEU and chrF of detokenized ``pred_tokens`` against each sample's ``tgt_text``
    (``translation/BLEU``, ``translation/chrF``).

    Args:
        tokenize: sacreBLEU's tokenizer for scoring (``'13a'``, its default and WMT's).
        lowercase: case-insensitive BLEU.
        collect_device, prefix: as ``mmengine.evaluator.BaseMetric``.
    """

    default_prefix = "translation"

    def __init__(self, tokenize: str = "13a", lowercase: bool = False, collect_device: str = "cpu",
                 prefix: str | None = None):
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.bleu = sacrebleu.BLEU(tokenize=tokenize, lowercase=lowercase)
        self.chrf = sacrebleu.CHRF(lowercase=lowercase)

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            if "tgt_text" not in sample:
                raise ValueError("CorpusBLEU needs the reference text: evaluate on a dataset with test_mode=True")
            self.results.append((sample["pred_tokens"], sample["tgt_text"]))

    def compute_metrics(self, results: list) -> dict[str, float]:
        tokenizer = (self.dataset_meta or {}).get("tokenizer")
        if tokenizer is None:
            raise ValueError("CorpusBLEU detokenizes with the dataset's metainfo['tokenizer'] (a sentencepiece "
                             "model), which this dataset does not provide")
        hypotheses = spm.SentencePieceProcessor(model_file=tokenizer).decode([list(p) for p, _ in results])
        references = [[ref for _, ref in results]]
        return dict(BLEU=self.bleu.corpus_score(hypotheses, references).score,
                    chrF=self.chrf.corpus_score(hypotheses, references).score)


MODELS.register_module(module=TransformerNMT)
for _dataset in (ParallelTextDataset, MiniCorpusDataset, L10nCorpusDataset):
    DATASETS.register_module(module=_dataset)
DATA_SAMPLERS.register_module(module=TokenBucketBatchSampler)
FUNCTIONS.register_module(module=collate_translation)
METRICS.register_module(module=CorpusBLEU)
