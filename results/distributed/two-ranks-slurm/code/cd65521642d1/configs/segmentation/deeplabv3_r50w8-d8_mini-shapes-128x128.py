# CPU-sized segmentation baseline: DeepLabV3 with a dilated ResNet-50 of width 8 (output stride 8,
# Bottleneck blocks), trained from scratch on the generated mini-shapes label maps (128x128;
# generated under data/mini_shapes/ on first use).
_base_ = './deeplabv3_r50-d8_4xb2-80k_cityscapes-512x1024.py'

data_root = 'data/mini_shapes/'
crop_size = (128, 128)
num_classes = 3
norm_cfg = dict(type='BN', requires_grad=True)

model = dict(
    data_preprocessor=dict(size=crop_size),
    pretrained=None,
    backbone=dict(stem_channels=16, base_channels=8, norm_cfg=norm_cfg),
    decode_head=dict(in_channels=256, channels=64, dilations=(1, 2, 3, 4), num_classes=num_classes,
                     norm_cfg=norm_cfg),
    auxiliary_head=dict(in_channels=128, channels=32, num_classes=num_classes, norm_cfg=norm_cfg))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
dataset = dict(type='attnbench.MiniShapesSegDataset', data_root=data_root)
train_dataloader = dict(
    batch_size=8, num_workers=0, persistent_workers=False,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(_delete_=True, **dataset, data_prefix=dict(img_path='img_dir/train', seg_map_path='ann_dir/train'),
                 pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(_delete_=True, **dataset, data_prefix=dict(img_path='img_dir/val', seg_map_path='ann_dir/val'),
                 pipeline=test_pipeline))
test_dataloader = val_dataloader

max_iters = 800
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
param_scheduler = [dict(type='PolyLR', eta_min=1e-4, power=0.9, begin=0, end=max_iters, by_epoch=False)]
optim_wrapper = dict(optimizer=dict(lr=0.05))
default_hooks = dict(logger=dict(interval=20), checkpoint=dict(interval=max_iters))
# One intra-op CPU thread per run, whatever the entry point or --jobs: CPU results depend on it
# (attnbench.mm.run_setup.apply_run_protocol), so runs at one seed stay comparable.
cpu_threads = 1
# A variant's run at seed s starts from the baseline's initial weights at seed s wherever the two
# share a tensor (attnbench.PairedInitHook): their difference then measures the variant, not the draw.
custom_hooks = [dict(type='attnbench.PairedInitHook')]
