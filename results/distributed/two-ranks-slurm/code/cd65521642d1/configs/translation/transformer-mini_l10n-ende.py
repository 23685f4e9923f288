# A CPU-sized Transformer on real English-German text (Debian's user-interface translations,
# configs/translation/_base_/datasets/l10n-ende.py): 2 + 2 layers, width 64, pre-norm, standard
# multi-head attention in all three slots, trained for a fixed number of iterations on one thread
# (the nmt-l10n task of the sweep; docs/translation.md gives its cost, learning curve and seed spread).
_base_ = [
    './_base_/models/transformer-base.py', './_base_/datasets/l10n-ende.py',
    './_base_/default_runtime.py',
]
model = dict(
    vocab_size=2000,  # = tokenizer.vocab_size of the dataset
    embed_dim=64,
    num_heads=4,
    ffn_dim=256,
    num_encoder_layers=2,
    num_decoder_layers=2,
    pre_norm=True,
    decode_cfg=dict(beam_size=4, len_penalty=1.0, max_len_a=1.2, max_len_b=10))
train_cfg = dict(type='IterBasedTrainLoop', max_iters=1500, val_interval=1500)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='Adam', lr=2e-3, betas=(0.9, 0.98), eps=1e-9),
    clip_grad=dict(max_norm=1.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=100),
    dict(type='CosineAnnealingLR', T_max=1400, eta_min=0.0, by_epoch=False, begin=100, end=1500),
]
default_hooks = dict(checkpoint=dict(interval=500), logger=dict(interval=100))
cpu_threads = 1
