# The synthetic mini corpus (attnbench.data.mini_corpus), written to `data_root` on first use:
# 20k/500/1000 sentence pairs, a joint 600-piece BPE sentencepiece model on train.src + train.tgt,
# and each split's token store (attnbench/data/token_store.py), all built once.
data_root = 'data/mini_corpus/'
generate = dict(seed=0, train=20000, valid=500, test=1000)
tokenizer = dict(train_files=['train.src', 'train.tgt'], vocab_size=600, model_type='bpe')
collate_fn = dict(type='attnbench.collate_translation')
train_dataloader = dict(
    batch_size=256,
    num_workers=0,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    batch_sampler=dict(type='attnbench.TokenBucketBatchSampler', max_tokens=2048),
    collate_fn=collate_fn,
    dataset=dict(type='attnbench.MiniCorpusDataset', data_root=data_root, generate=generate,
                 data_prefix=dict(src='train.src', tgt='train.tgt'), tokenizer=tokenizer))
val_dataloader = dict(
    batch_size=256,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    batch_sampler=dict(type='attnbench.TokenBucketBatchSampler', max_tokens=4096),
    collate_fn=collate_fn,
    dataset=dict(type='attnbench.MiniCorpusDataset', data_root=data_root, generate=generate,
                 data_prefix=dict(src='valid.src', tgt='valid.tgt'), tokenizer=tokenizer, test_mode=True))
test_dataloader = dict(
    val_dataloader,
    dataset=dict(val_dataloader['dataset'], data_prefix=dict(src='test.src', tgt='test.tgt')))
val_evaluator = dict(type='attnbench.CorpusBLEU')
test_evaluator = val_evaluator
