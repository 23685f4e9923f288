# Faster R-CNN R-50-FPN 1x on COCO: the baseline of the study's detection experiments (and of
# mmdet's empirical_attention configs). Variants inherit from this file.
_base_ = 'mmdet::faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py'
custom_imports = dict(imports=['attnbench.mm'], allow_failed_imports=False)
# bbox AP (the study's metric) and the class-agnostic AP beside it (pycocotools useCats=0): with
# both, a variant's gain in localisation can be told apart from a gain in telling classes apart
val_evaluator = [
    dict(type='CocoMetric', ann_file='data/coco/annotations/instances_val2017.json', metric='bbox', format_only=False),
    dict(type='attnbench.ClassAgnosticCocoMetric', ann_file='data/coco/annotations/instances_val2017.json'),
]
test_evaluator = val_evaluator
