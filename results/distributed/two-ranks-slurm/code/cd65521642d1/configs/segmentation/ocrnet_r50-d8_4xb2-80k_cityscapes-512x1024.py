# Survey row 'ocr' (object-contextual representations, Yuan et al. ECCV 2020): the DeepLabV3
# R-50-D8 Cityscapes setting with its decode head replaced by OCRNet's cascade, as mmseg's
# _base_/models/ocrnet_r50-d8.py: an FCN head predicts the soft object regions (and takes the
# auxiliary head's place and weight), attnbench's OCRHead (mmseg's OCRHead, object context computed
# by attnbench.attention.ObjectContext; mmseg OCRNet checkpoints load strictly) refines them.
_base_ = './deeplabv3_r50-d8_4xb2-80k_cityscapes-512x1024.py'

norm_cfg = dict(type='SyncBN', requires_grad=True)
num_classes = 19
model = dict(
    type='CascadeEncoderDecoder',
    num_stages=2,
    decode_head=[
        dict(type='FCNHead', in_channels=1024, in_index=2, channels=256, num_convs=1, concat_input=False,
             dropout_ratio=0.1, num_classes=num_classes, norm_cfg=norm_cfg, align_corners=False,
             loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=0.4)),
        dict(type='attnbench.OCRHead', in_channels=2048, in_index=3, channels=512, ocr_channels=256,
             dropout_ratio=0.1, num_classes=num_classes, norm_cfg=norm_cfg, align_corners=False,
             loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    ],
    auxiliary_head=None)
