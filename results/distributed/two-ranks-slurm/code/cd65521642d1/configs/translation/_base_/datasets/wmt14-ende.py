# WMT14 English-German as plain-text parallel files (one sentence per line) under `data_root`,
# e.g. the Stanford NMT release: train.en/train.de, newstest2013 (valid), newstest2014 (test).
# Point `data_root` and the file names at your copy. A joint 32k BPE sentencepiece model is
# trained on the training text on first use (on 2M sampled lines) and cached in `data_root`; each
# split is then encoded once into a token store there (uint16 ids, attnbench/data/token_store.py)
# that every rank and dataloader worker memory-maps read-only.
data_root = 'data/wmt14_en_de/'
tokenizer = dict(train_files=['train.en', 'train.de'], vocab_size=32000, model_type='bpe',
                 input_sentence_size=2000000)
collate_fn = dict(type='attnbench.collate_translation')
train_dataloader = dict(
    batch_size=1024,  # most sentences per batch; max_tokens is the binding limit
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    batch_sampler=dict(type='attnbench.TokenBucketBatchSampler', max_tokens=4096),
    collate_fn=collate_fn,
    dataset=dict(type='attnbench.ParallelTextDataset', data_root=data_root,
                 data_prefix=dict(src='train.en', tgt='train.de'), tokenizer=tokenizer,
                 filter_cfg=dict(min_length=1, max_length=256)))
val_dataloader = dict(
    batch_size=128,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    batch_sampler=dict(type='attnbench.TokenBucketBatchSampler', max_tokens=8192),
    collate_fn=collate_fn,
    dataset=dict(type='attnbench.ParallelTextDataset', data_root=data_root,
                 data_prefix=dict(src='newstest2013.en', tgt='newstest2013.de'), tokenizer=tokenizer,
                 test_mode=True))
test_dataloader = dict(
    val_dataloader,
    dataset=dict(val_dataloader['dataset'], data_prefix=dict(src='newstest2014.en', tgt='newstest2014.de')))
val_evaluator = dict(type='attnbench.CorpusBLEU')
test_evaluator = val_evaluator
