# The FCN segmentation baseline on the 'near-far' diagnostic rule of mini shapes: what decides an object's
# class is in attnbench/data/mini_shapes.py and docs/diagnostics.md (with the rows predicted to help).
_base_ = './fcn_r50w8-d8_mini-shapes-128x128.py'

rule = 'near-far'
data_root = 'data/mini_shapes_near-far/'
dataset = dict(data_root=data_root, generate=dict(rule=rule))
train_dataloader = dict(dataset=dataset)
val_dataloader = dict(dataset=dataset)
test_dataloader = val_dataloader
# mIoU, and of the object pixels predicted as an object, the share given the right class
val_evaluator = [dict(type='IoUMetric', iou_metrics=['mIoU']), dict(type='attnbench.SegContextAccuracyMetric')]
test_evaluator = val_evaluator
