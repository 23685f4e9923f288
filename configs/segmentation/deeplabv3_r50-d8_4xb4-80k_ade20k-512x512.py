# DeepLabV3 R-50-D8 on ADE20K (512x512 crops, 80k iterations, 4 GPUs x 4 images): mmseg's published
# baseline (42.42 mIoU). The sweep puts its variants into this backbone with
#   python tools/sweep.py --config configs/segmentation/deeplabv3_r50-d8_4xb4-80k_ade20k-512x512.py ...
# (mmcv's initialisation, plugins in conv4 and conv5, as the Cityscapes configs).
_base_ = 'mmseg::deeplabv3/deeplabv3_r50-d8_4xb4-80k_ade20k-512x512.py'
custom_imports = dict(imports=['attnbench.mm'], allow_failed_imports=False)
