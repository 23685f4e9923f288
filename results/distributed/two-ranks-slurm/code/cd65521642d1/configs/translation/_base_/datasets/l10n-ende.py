# Real English-German text: Debian's user-interface translations (attnbench/data/l10n_corpus.py),
# built into `data_root` on first use (`python tools/make_l10n_corpus.py` builds it ahead; it needs
# apt-get and Debian's archive). About 197k/4k/4k pairs, 33 characters on average; split by a hash of
# the English, so no English string is in two splits. A joint 2,000-piece BPE sentencepiece model
# on train.en + train.de and each split's token store are built once, as for every corpus. Your own
# parallel files: type='attnbench.ParallelTextDataset' with data_root and data_prefix set to them.
data_root = 'data/l10n-ende/'
tokenizer = dict(train_files=['train.en', 'train.de'], vocab_size=2000, model_type='bpe')
collate_fn = dict(type='attnbench.collate_translation')
train_dataloader = dict(
    batch_size=512,
    num_workers=0,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    batch_sampler=dict(type='attnbench.TokenBucketBatchSampler', max_tokens=4096),
    collate_fn=collate_fn,
    dataset=dict(type='attnbench.L10nCorpusDataset', data_root=data_root,
                 data_prefix=dict(src='train.en', tgt='train.de'), tokenizer=tokenizer,
                 filter_cfg=dict(min_length=1, max_length=64)))
val_dataloader = dict(
    batch_size=512,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    batch_sampler=dict(type='attnbench.TokenBucketBatchSampler', max_tokens=8192),
    collate_fn=collate_fn,
    dataset=dict(type='attnbench.L10nCorpusDataset', data_root=data_root,
                 data_prefix=dict(src='valid.en', tgt='valid.de'), tokenizer=tokenizer, test_mode=True))
test_dataloader = dict(
    val_dataloader,
    dataset=dict(val_dataloader['dataset'], data_prefix=dict(src='test.en', tgt='test.de')))
val_evaluator = dict(type='attnbench.CorpusBLEU')
test_evaluator = val_evaluator
