# The detection baseline on the 'same-different' diagnostic rule of mini shapes: what decides an object's
# class is in attnbench/data/mini_shapes.py and docs/diagnostics.md (with the rows predicted to help).
_base_ = './faster-rcnn_r50w8_fpn_mini-shapes.py'

rule = 'same-different'
data_root = 'data/mini_shapes_same-different/'
dataset = dict(data_root=data_root, generate=dict(rule=rule))
train_dataloader = dict(dataset=dataset)
val_dataloader = dict(dataset=dataset)
test_dataloader = val_dataloader
val_evaluator = [
    dict(type='CocoMetric', ann_file=data_root + 'annotations/instances_val.json', metric='bbox', format_only=False),
    dict(type='attnbench.ClassAgnosticCocoMetric', ann_file=data_root + 'annotations/instances_val.json'),
    # of the objects found, the share given the right class: what the rule's context decides
    dict(type='attnbench.ContextAccuracyMetric', ann_file=data_root + 'annotations/instances_val.json'),
]
test_evaluator = val_evaluator
