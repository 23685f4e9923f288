# CPU-sized detection baseline: the study's Faster R-CNN with a ResNet-50 of width 8 (Bottleneck
# blocks, so plugins and DCN apply), trained from scratch on the generated mini-shapes set
# (128x128 images; generated under data/mini_shapes/ on first use).
_base_ = './faster-rcnn_r50_fpn_1x_coco.py'

data_root = 'data/mini_shapes/'
image_size = (128, 128)
num_classes = 2
norm_cfg = dict(type='BN', requires_grad=True)

model = dict(
    data_preprocessor=dict(pad_size_divisor=32),
    backbone=dict(base_channels=8, frozen_stages=-1, norm_cfg=norm_cfg, norm_eval=False, init_cfg=None),
    neck=dict(in_channels=[32, 64, 128, 256], out_channels=64),
    rpn_head=dict(
        in_channels=64, feat_channels=64,
        anchor_generator=dict(scales=[4], ratios=[0.5, 1.0, 2.0], strides=[4, 8, 16, 32, 64])),
    roi_head=dict(
        bbox_roi_extractor=dict(roi_layer=dict(sampling_ratio=2), out_channels=64),
        bbox_head=dict(in_channels=64, fc_out_channels=256, num_classes=num_classes)),
    # few proposals and samples: mmcv's CPU NMS and RoIAlign dominate a step otherwise
    train_cfg=dict(rpn=dict(sampler=dict(num=128)), rpn_proposal=dict(nms_pre=500, max_per_img=200),
                   rcnn=dict(sampler=dict(num=64))),
    test_cfg=dict(rpn=dict(nms_pre=300, max_per_img=100), rcnn=dict(max_per_img=20)))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
dataset = dict(type='attnbench.MiniShapesDetDataset', data_root=data_root)
train_dataloader = dict(
    batch_size=8, num_workers=0, persistent_workers=False,
    dataset=dict(_delete_=True, **dataset, ann_file='annotations/instances_train.json',
                 data_prefix=dict(img='images/train/'), filter_cfg=dict(filter_empty_gt=True),
                 pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=8, num_workers=0, persistent_workers=False,
    dataset=dict(_delete_=True, **dataset, ann_file='annotations/instances_val.json',
                 data_prefix=dict(img='images/val/'), test_mode=True, pipeline=test_pipeline))
test_dataloader = val_dataloader
# the base's two metrics (bbox AP, class-agnostic AP) on the mini-shapes annotations
val_evaluator = [
    dict(type='CocoMetric', ann_file=data_root + 'annotations/instances_val.json', metric='bbox', format_only=False),
    dict(type='attnbench.ClassAgnosticCocoMetric', ann_file=data_root + 'annotations/instances_val.json'),
]
test_evaluator = val_evaluator

max_epochs = 6
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=100),
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[5], gamma=0.1),
]
optim_wrapper = dict(optimizer=dict(lr=0.04), clip_grad=dict(max_norm=10, norm_type=2))
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=max_epochs))
auto_scale_lr = dict(enable=False, base_batch_size=8)
# One intra-op CPU thread per run, whatever the entry point or --jobs: CPU results depend on it
# (attnbench.mm.run_setup.apply_run_protocol), so runs at one seed stay comparable.
cpu_threads = 1
# A variant's run at seed s starts from the baseline's initial weights at seed s wherever the two
# share a tensor (attnbench.PairedInitHook): their difference then measures the variant, not the draw.
custom_hooks = [dict(type='attnbench.PairedInitHook')]
