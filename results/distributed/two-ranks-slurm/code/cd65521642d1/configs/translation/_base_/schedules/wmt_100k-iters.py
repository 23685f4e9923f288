# Transformer-base schedule (Vaswani et al. 2017, Sec. 5.3): 100k iterations of Adam
# (0.9, 0.98, eps 1e-9), 4000 warm-up iterations. Their ~25k tokens per batch are 8 GPUs x 4096
# (tools/train.py --launcher pytorch); the inverse-square-root decay is replaced by mmengine's
# cosine decay. Validation every 5000 iterations.
train_cfg = dict(type='IterBasedTrainLoop', max_iters=100000, val_interval=5000)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='Adam', lr=7e-4, betas=(0.9, 0.98), eps=1e-9))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=4000),
    dict(type='CosineAnnealingLR', T_max=96000, eta_min=1e-5, by_epoch=False, begin=4000, end=100000),
]
