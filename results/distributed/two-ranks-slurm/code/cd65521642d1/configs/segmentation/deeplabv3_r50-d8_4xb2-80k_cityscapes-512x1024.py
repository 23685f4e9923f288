# DeepLabV3 R-50-D8 on Cityscapes (512x1024 crops, 80k iterations): the segmentation baseline.
# Variants inherit from this file and put the mechanisms into conv4 and conv5.
_base_ = 'mmseg::deeplabv3/deeplabv3_r50-d8_4xb2-80k_cityscapes-512x1024.py'
custom_imports = dict(imports=['attnbench.mm'], allow_failed_imports=False)
