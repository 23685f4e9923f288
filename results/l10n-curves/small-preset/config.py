collate_fn = dict(type='attnbench.collate_translation')
cpu_threads = 1
custom_hooks = [
    dict(type='attnbench.LearningCurveHook'),
]
custom_imports = dict(
    allow_failed_imports=False, imports=[
        'attnbench.mm',
    ])
data_root = 'data/l10n-ende/'
default_hooks = dict(
    checkpoint=dict(
        by_epoch=False,
        interval=3200,
        max_keep_ckpts=1,
        rule='greater',
        save_best='translation/BLEU',
        type='CheckpointHook'),
    logger=dict(interval=100, type='LoggerHook'),
    param_scheduler=dict(type='ParamSchedulerHook'),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    timer=dict(type='IterTimerHook'))
env_cfg = dict(
    cudnn_benchmark=False,
    dist_cfg=dict(backend='nccl'),
    mp_cfg=dict(mp_start_method='fork'))
launcher = 'none'
load_from = None
log_level = 'INFO'
log_processor = dict(by_epoch=False)
max_iters = 3200
model = dict(
    attention_dropout=0.0,
    cross_attention=dict(type='standard'),
    decode_cfg=dict(beam_size=4, len_penalty=1.0, max_len_a=1.2, max_len_b=10),
    decoder_self_attention=dict(type='standard'),
    dropout=0.0,
    embed_dim=128,
    encoder_self_attention=dict(type='standard'),
    ffn_dim=512,
    label_smoothing=0.1,
    num_decoder_layers=2,
    num_encoder_layers=2,
    num_heads=4,
    pre_norm=True,
    type='attnbench.TransformerNMT',
    vocab_size=2000)
optim_wrapper = dict(
    clip_grad=dict(max_norm=1.0),
    optimizer=dict(betas=(
        0.9,
        0.98,
    ), eps=1e-09, lr=0.002, type='Adam'),
    type='OptimWrapper')
param_scheduler = [
    dict(begin=0, by_epoch=False, end=320, start_factor=0.01, type='LinearLR'),
    dict(
        T_max=2880,
        begin=320,
        by_epoch=False,
        end=3200,
        eta_min=0.0,
        type='CosineAnnealingLR'),
]
randomness = dict(seed=0)
resume = False
test_cfg = dict(type='TestLoop')
test_dataloader = dict(
    batch_sampler=dict(
        max_tokens=8192, type='attnbench.TokenBucketBatchSampler'),
    batch_size=512,
    collate_fn=dict(type='attnbench.collate_translation'),
    dataset=dict(
        data_prefix=dict(src='heldout.en', tgt='heldout.de'),
        data_root='data/l10n-ende/',
        test_mode=True,
        tokenizer=dict(
            model_type='bpe',
            train_files=[
                'train.en',
                'train.de',
            ],
            vocab_size=2000),
        type='attnbench.L10nCorpusDataset'),
    num_workers=0,
    sampler=dict(shuffle=False, type='DefaultSampler'))
test_evaluator = dict(type='attnbench.CorpusBLEU')
tokenizer = dict(
    model_type='bpe', train_files=[
        'train.en',
        'train.de',
    ], vocab_size=2000)
train_cfg = dict(max_iters=3200, type='IterBasedTrainLoop', val_interval=800)
train_dataloader = dict(
    batch_sampler=dict(
        max_tokens=2048, type='attnbench.TokenBucketBatchSampler'),
    batch_size=512,
    collate_fn=dict(type='attnbench.collate_translation'),
    dataset=dict(
        data_prefix=dict(src='train.en', tgt='train.de'),
        data_root='data/l10n-ende/',
        filter_cfg=dict(max_length=64, min_length=1),
        tokenizer=dict(
            model_type='bpe',
            train_files=[
                'train.en',
                'train.de',
            ],
            vocab_size=2000),
        type='attnbench.L10nCorpusDataset'),
    num_workers=0,
    sampler=dict(shuffle=True, type='InfiniteSampler'))
val_cfg = dict(type='ValLoop')
val_dataloader = dict(
    batch_sampler=dict(
        max_tokens=8192, type='attnbench.TokenBucketBatchSampler'),
    batch_size=512,
    collate_fn=dict(type='attnbench.collate_translation'),
    dataset=dict(
        data_prefix=dict(src='valid.en', tgt='valid.de'),
        data_root='data/l10n-ende/',
        test_mode=True,
        tokenizer=dict(
            model_type='bpe',
            train_files=[
                'train.en',
                'train.de',
            ],
            vocab_size=2000),
        type='attnbench.L10nCorpusDataset'),
    num_workers=0,
    sampler=dict(shuffle=False, type='DefaultSampler'))
val_evaluator = dict(type='attnbench.CorpusBLEU')
warmup_iters = 320
work_dir = '/tmp/curves/small-preset'
