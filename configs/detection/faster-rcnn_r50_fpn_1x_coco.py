# Faster R-CNN R-50-FPN 1x on COCO: the baseline of the study's detection experiments (and of
# mmdet's empirical_attention configs). Variants inherit from this file.
_base_ = 'mmdet::faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py'
custom_imports = dict(imports=['attnbench.mm'], allow_failed_imports=False)
