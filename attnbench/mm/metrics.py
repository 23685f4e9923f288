"""Detection metrics beside mmdet's: the class-agnostic COCO bbox AP.

    val_evaluator = [dict(type='CocoMetric', ann_file=ANN, metric='bbox'),
                     dict(type='attnbench.ClassAgnosticCocoMetric', ann_file=ANN)]

The bbox AP of COCO matches a detection to a ground-truth box only within one class; the
class-agnostic AP (pycocotools ``params.useCats = 0``) matches across classes, so it measures
localisation alone. A variant that raises the AP but not the class-agnostic AP tells classes apart
better (context); one that raises both finds objects better.
"""
from __future__ import annotations

import os.path as osp
import tempfile

from mmdet.datasets.api_wrappers import COCO, COCOeval
from mmdet.evaluation import CocoMetric
from mmengine.fileio import load

from .registry import METRICS


@METRICS.register_module()
class ClassAgnosticCocoMetric(CocoMetric):
    """COCO bbox AP with detections matched to ground truth of any class (``useCats = 0``).

    Reports ``coco_agnostic/bbox_mAP`` (AP at IoU 0.50:0.95), ``bbox_mAP_50`` and ``bbox_mAP_75``;
    the other parameters (image and category ids, IoU thresholds, detections per image) are
    ``CocoMetric``'s, whose arguments it takes (``metric`` is always ``'bbox'``).
    """

    default_prefix = "coco_agnostic"

    def __init__(self, ann_file: str | None = None, **kwargs) -> None:
        super().__init__(ann_file=ann_file, metric="bbox", **kwargs)

    def compute_metrics(self, results: list) -> dict[str, float]:
        gts, preds = zip(*results)
        with tempfile.TemporaryDirectory() as tmp:
            prefix = osp.join(tmp, "results")
            if self._coco_api is None:
                self._coco_api = COCO(self.gt_to_coco_json(gt_dicts=gts, outfile_prefix=prefix))
            if self.cat_ids is None:
                self.cat_ids = self._coco_api.get_cat_ids(cat_names=self.dataset_meta["classes"])
            if self.img_ids is None:
                self.img_ids = self._coco_api.get_img_ids()
            detections = load(self.results2json(preds, prefix)["bbox"])
        if not detections:  # loadRes refuses an empty list
            return dict(bbox_mAP=0.0, bbox_mAP_50=0.0, bbox_mAP_75=0.0)
        evaluation = COCOeval(self._coco_api, self._coco_api.loadRes(detections), "bbox")
        evaluation.params.useCats = 0
        evaluation.params.catIds = self.cat_ids
        evaluation.params.imgIds = self.img_ids
        evaluation.params.maxDets = list(self.proposal_nums)
        evaluation.params.iouThrs = self.iou_thrs
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
        return dict(bbox_mAP=round(evaluation.stats[0], 3), bbox_mAP_50=round(evaluation.stats[1], 3),
                    bbox_mAP_75=round(evaluation.stats[2], 3))
