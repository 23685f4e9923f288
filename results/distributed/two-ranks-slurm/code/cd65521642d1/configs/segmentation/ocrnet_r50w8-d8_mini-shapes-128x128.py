# Survey row 'ocr' (object-contextual representations, Yuan et al. ECCV 2020) at CPU size: the mini
# DeepLabV3 segmentor with its decode head replaced by OCRNet's cascade, an FCN head that predicts
# the soft object regions (it also takes the auxiliary head's place and weight) and attnbench's
# OCRHead (mmseg's head with the object context computed by attnbench.attention.ObjectContext).
_base_ = './deeplabv3_r50w8-d8_mini-shapes-128x128.py'

norm_cfg = dict(type='BN', requires_grad=True)
num_classes = 3
model = dict(
    type='CascadeEncoderDecoder',
    num_stages=2,
    decode_head=[
        dict(type='FCNHead', in_channels=128, in_index=2, channels=32, num_convs=1, concat_input=False,
             dropout_ratio=0.1, num_classes=num_classes, norm_cfg=norm_cfg, align_corners=False,
             loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=0.4)),
        dict(type='attnbench.OCRHead', in_channels=256, in_index=3, channels=64, ocr_channels=32,
             dropout_ratio=0.1, num_classes=num_classes, norm_cfg=norm_cfg, align_corners=False,
             loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    ],
    auxiliary_head=None)
