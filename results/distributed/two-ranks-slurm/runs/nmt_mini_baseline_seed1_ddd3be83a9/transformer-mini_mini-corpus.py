attnbench_run = dict(
    E1=False,
    E2=False,
    E3=False,
    E4=False,
    params='',
    preset='mini',
    run_id='nmt_mini_baseline_seed1_ddd3be83a9',
    seed=1,
    slot=None,
    task='nmt',
    variant='baseline')
auto_scale_lr = dict(base_batch_size=256, enable=True)
collate_fn = dict(type='attnbench.collate_translation')
cpu_threads = 1
custom_hooks = [
    dict(type='attnbench.StopOnInvalidLossHook'),
]
custom_imports = dict(
    allow_failed_imports=False, imports=[
        'attnbench.mm',
    ])
data_root = 'data/mini_corpus/'
default_hooks = dict(
    checkpoint=dict(
        by_epoch=False,
        interval=500,
        max_keep_ckpts=1,
        rule='greater',
        save_best='translation/BLEU',
        type='CheckpointHook'),
    logger=dict(interval=50, type='LoggerHook'),
    param_scheduler=dict(type='ParamSchedulerHook'),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    timer=dict(type='IterTimerHook'))
env_cfg = dict(
    cudnn_benchmark=False,
    dist_cfg=dict(backend='nccl'),
    mp_cfg=dict(mp_start_method='fork'))
find_unused_parameters = True
generate = dict(seed=0, test=1000, train=20000, valid=500)
launcher = 'pytorch'
load_from = None
log_level = 'INFO'
log_processor = dict(by_epoch=False)
model = dict(
    attention_dropout=0.0,
    cross_attention=dict(type='standard'),
    decode_cfg=dict(beam_size=4, len_penalty=1.0, max_len_a=1.2, max_len_b=10),
    decoder_self_attention=dict(type='standard'),
    dropout=0.1,
    embed_dim=64,
    encoder_self_attention=dict(type='standard'),
    ffn_dim=256,
    label_smoothing=0.1,
    num_decoder_layers=2,
    num_encoder_layers=2,
    num_heads=4,
    pre_norm=True,
    type='attnbench.TransformerNMT',
    vocab_size=600)
model_wrapper_cfg = dict(
    broadcast_buffers=False,
    device_ids=None,
    find_unused_parameters=True,
    type='MMDistributedDataParallel')
optim_wrapper = dict(
    clip_grad=dict(max_norm=1.0),
    optimizer=dict(betas=(
        0.9,
        0.98,
    ), eps=1e-09, lr=0.002, type='Adam'),
    type='OptimWrapper')
param_scheduler = [
    dict(begin=0, by_epoch=False, end=50, start_factor=0.01, type='LinearLR'),
    dict(
        T_max=450,
        begin=50,
        by_epoch=False,
        end=500,
        eta_min=0.0,
        type='CosineAnnealingLR'),
]
randomness = dict(seed=1)
resume = False
test_cfg = dict(type='TestLoop')
test_dataloader = dict(
    batch_sampler=dict(
        max_tokens=4096, type='attnbench.TokenBucketBatchSampler'),
    batch_size=256,
    collate_fn=dict(type='attnbench.collate_translation'),
    dataset=dict(
        data_prefix=dict(src='test.src', tgt='test.tgt'),
        data_root='data/mini_corpus/',
        generate=dict(seed=0, test=1000, train=20000, valid=500),
        test_mode=True,
        tokenizer=dict(
            model_type='bpe',
            train_files=[
                'train.src',
                'train.tgt',
            ],
            vocab_size=600),
        type='attnbench.MiniCorpusDataset'),
    num_workers=0,
    sampler=dict(shuffle=False, type='DefaultSampler'))
test_evaluator = dict(type='attnbench.CorpusBLEU')
tokenizer = dict(
    model_type='bpe', train_files=[
        'train.src',
        'train.tgt',
    ], vocab_size=600)
train_cfg = dict(max_iters=500, type='IterBasedTrainLoop', val_interval=500)
train_dataloader = dict(
    batch_sampler=dict(
        max_tokens=1024, type='attnbench.TokenBucketBatchSampler'),
    batch_size=128,
    collate_fn=dict(type='attnbench.collate_translation'),
    dataset=dict(
        data_prefix=dict(src='train.src', tgt='train.tgt'),
        data_root='data/mini_corpus/',
        generate=dict(seed=0, test=1000, train=20000, valid=500),
        tokenizer=dict(
            model_type='bpe',
            train_files=[
                'train.src',
                'train.tgt',
            ],
            vocab_size=600),
        type='attnbench.MiniCorpusDataset'),
    num_workers=0,
    sampler=dict(shuffle=True, type='InfiniteSampler'))
val_cfg = dict(type='ValLoop')
val_dataloader = dict(
    batch_sampler=dict(
        max_tokens=4096, type='attnbench.TokenBucketBatchSampler'),
    batch_size=256,
    collate_fn=dict(type='attnbench.collate_translation'),
    dataset=dict(
        data_prefix=dict(src='valid.src', tgt='valid.tgt'),
        data_root='data/mini_corpus/',
        generate=dict(seed=0, test=1000, train=20000, valid=500),
        test_mode=True,
        tokenizer=dict(
            model_type='bpe',
            train_files=[
                'train.src',
                'train.tgt',
            ],
            vocab_size=600),
        type='attnbench.MiniCorpusDataset'),
    num_workers=0,
    sampler=dict(shuffle=False, type='DefaultSampler'))
val_evaluator = dict(type='attnbench.CorpusBLEU')
work_dir = 'results/distributed/two-ranks-slurm/runs/nmt_mini_baseline_seed1_ddd3be83a9'
