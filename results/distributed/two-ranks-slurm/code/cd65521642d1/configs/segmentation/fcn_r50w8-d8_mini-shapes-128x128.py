# The mini segmentor with mmseg's FCN decode head (two 3x3 convolutions on conv5) in place of
# DeepLabV3's ASPP, for the diagnostic suite (tasks fcn-RULE, docs/diagnostics.md): ASPP's image
# pooling hands every pixel an image-wide context of its own, so on a rule whose context is one
# salient key (flag) the DeepLabV3 baseline learns the rule without attention; with an FCN head,
# image-wide context has to come through the backbone, where the attention rows put it.
_base_ = './deeplabv3_r50w8-d8_mini-shapes-128x128.py'

norm_cfg = dict(type='BN', requires_grad=True)
num_classes = 3
model = dict(
    decode_head=dict(
        _delete_=True, type='FCNHead', in_channels=256, in_index=3, channels=64, num_convs=2,
        concat_input=True, dropout_ratio=0.1, num_classes=num_classes, norm_cfg=norm_cfg, align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)))
