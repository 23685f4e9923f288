# A Transformer that translates real English-German text (Debian's user-interface translations,
# configs/translation/_base_/datasets/l10n-ende.py) in about 20 minutes on one CPU thread: the nmt-l10n
# task's `small` preset. Shape and schedule chosen by measured learning curves, BLEU and chrF per
# CPU-minute (results/l10n-curves/, docs/translation.md#a-model-that-translates-the-small-preset): 2 + 2
# layers of width 128 (4 heads, FFN 512, pre-norm), a joint 2,000-piece BPE vocabulary, no dropout,
# label smoothing 0.1 and batches of up to 2,048 tokens, 3,200 iterations. Validation decodes the
# corpus's valid split; the test split here is the held-out one, the catalogues of packages outside
# the corpus (attnbench/data/l10n_heldout_packages.txt), which the sweep tests each run on.
_base_ = [
    './_base_/models/transformer-base.py', './_base_/datasets/l10n-ende.py',
    './_base_/default_runtime.py',
]
model = dict(
    vocab_size=2000,  # = tokenizer.vocab_size of the dataset
    embed_dim=128,
    num_heads=4,
    ffn_dim=512,
    num_encoder_layers=2,
    num_decoder_layers=2,
    pre_norm=True,
    dropout=0.0,
    decode_cfg=dict(beam_size=4, len_penalty=1.0, max_len_a=1.2, max_len_b=10))
train_dataloader = dict(batch_sampler=dict(max_tokens=2048))
test_dataloader = dict(dataset=dict(data_prefix=dict(src='heldout.en', tgt='heldout.de')))
max_iters = 3200
warmup_iters = 320
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='Adam', lr=2e-3, betas=(0.9, 0.98), eps=1e-9),
    clip_grad=dict(max_norm=1.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=warmup_iters),
    dict(type='CosineAnnealingLR', T_max=max_iters - warmup_iters, eta_min=0.0, by_epoch=False, begin=warmup_iters,
         end=max_iters),
]
default_hooks = dict(checkpoint=dict(interval=max_iters), logger=dict(interval=100))
cpu_threads = 1
