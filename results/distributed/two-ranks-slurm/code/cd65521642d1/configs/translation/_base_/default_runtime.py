# Runtime shared by the translation configs (mmengine Runner; attnbench types are fully scoped).
custom_imports = dict(imports=['attnbench.mm'], allow_failed_imports=False)
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=5000, max_keep_ckpts=1,
                    save_best='translation/BLEU', rule='greater'),
    sampler_seed=dict(type='DistSamplerSeedHook'))
env_cfg = dict(cudnn_benchmark=False, mp_cfg=dict(mp_start_method='fork'), dist_cfg=dict(backend='nccl'))
log_processor = dict(by_epoch=False)
log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=0)
