"""The published accuracy of the full-scale configs, drawn beside the mini runs and the FLOPs table."""
#: Published accuracy of the full-scale configs, (task, variant) -> (value, source): COCO val bbox AP
#: of mmdet's model zoo (Faster R-CNN R-50-FPN 1x: configs/faster_rcnn, empirical_attention, dcn) and
#: Cityscapes val mIoU of mmseg's (DeepLabV3 R-50-D8 512x1024 80k), WMT14 en-de newstest2014 BLEU
#: of Transformer-base (Vaswani et al. 2017, Table 2).
PUBLISHED = {
    ("det", "baseline"): (37.4, "mmdet model zoo"),
    ("det", "1111"): (40.0, "mmdet model zoo (empirical_attention)"),
    ("det", "0010"): (39.1, "mmdet model zoo (empirical_attention)"),
    ("det", "1111+deformable"): (42.1, "mmdet model zoo (empirical_attention)"),
    ("det", "0010+deformable"): (42.0, "mmdet model zoo (empirical_attention)"),
    ("det", "deformable"): (41.3, "mmdet model zoo (dcn, dconv c3-c5)"),
    ("det", "deformable_v2"): (41.4, "mmdet model zoo (dcn, mdconv c3-c5)"),
    ("seg", "baseline"): (79.32, "mmseg model zoo"),
    ("nmt", "baseline"): (27.3, "Vaswani et al. 2017"),
}
