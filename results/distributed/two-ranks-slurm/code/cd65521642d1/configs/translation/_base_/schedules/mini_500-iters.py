# 500 iterations of Adam (beta2 0.98) with 50 warm-up iterations, then cosine decay to zero;
# one validation, at the end. About a minute on one core of a 2-core CPU for transformer-mini.
train_cfg = dict(type='IterBasedTrainLoop', max_iters=500, val_interval=500)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='Adam', lr=2e-3, betas=(0.9, 0.98), eps=1e-9),
    clip_grad=dict(max_norm=1.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=50),
    dict(type='CosineAnnealingLR', T_max=450, eta_min=0.0, by_epoch=False, begin=50, end=500),
]
