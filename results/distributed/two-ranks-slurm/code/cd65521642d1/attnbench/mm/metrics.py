"""Metrics beside mmdet's and mmseg's: the class-agnostic COCO bbox AP, and the context accuracy
of detection and segmentation.

    val_evaluator = [dict(type='CocoMetric', ann_file=ANN, metric='bbox'),
                     dict(type='attnbench.ClassAgnosticCocoMetric', ann_file=ANN),
                     dict(type='attnbench.ContextAccuracyMetric', ann_file=ANN)]

The bbox AP of COCO matches a detection to a ground-truth box only within one class; the
class-agnostic AP (pycocotools ``params.useCats = 0``) matches across classes, so it measures
localisation alone. A variant that raises the AP but not the class-agnostic AP tells classes apart
better (context); one that raises both finds objects better. The context accuracy asks the
context question alone: of the objects a model found, how many got the right class.
"""
from __future__ import annotations

import os.path as osp
import tempfile

import numpy as np
import torch
from mmdet.datasets.api_wrappers import COCO, COCOeval
from mmdet.evaluation import CocoMetric
from mmdet.structures.bbox import bbox_overlaps
from mmengine.evaluator import BaseMetric
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


@METRICS.register_module()
class ContextAccuracyMetric(BaseMetric):
    """How often a detector gives an object it found the right class: the part of detection that the
    context decides on the diagnostic tasks (``docs/diagnostics.md``), apart from localisation.

    Each ground-truth box of ``ann_file`` is *found* when a detection overlaps it at IoU >= ``iou``;
    the one of highest score among those is its detection, *right* when its class is the box's.
    Reports ``context/accuracy`` (right / found; 0.5 is chance with two balanced classes) and
    ``context/found`` (found / boxes).
    """

    default_prefix = "context"

    def __init__(self, ann_file: str, iou: float = 0.5, **kwargs) -> None:
        super().__init__(**kwargs)
        self.coco = COCO(ann_file)
        self.iou = iou

    def process(self, data_batch, data_samples) -> None:
        for sample in data_samples:
            pred = sample["pred_instances"]
            self.results.append((sample["img_id"], pred["bboxes"].cpu(), pred["scores"].cpu(), pred["labels"].cpu()))

    def compute_metrics(self, results: list) -> dict[str, float]:
        cat_ids = self.coco.get_cat_ids(cat_names=self.dataset_meta["classes"])
        found = right = boxes = 0
        for img_id, bboxes, scores, labels in results:
            for ann in self.coco.load_anns(self.coco.get_ann_ids(img_ids=[img_id])):
                boxes += 1
                x, y, w, h = ann["bbox"]
                overlaps = bbox_overlaps(torch.tensor([[x, y, x + w, y + h]], dtype=bboxes.dtype), bboxes)[0]
                candidates = torch.nonzero(overlaps >= self.iou)[:, 0]
                if len(candidates):
                    found += 1
                    best = candidates[scores[candidates].argmax()]
                    right += cat_ids[int(labels[best])] == ann["category_id"]
        return dict(accuracy=right / found if found else 0.0, found=found / boxes if boxes else 0.0)


@METRICS.register_module()
class SegContextAccuracyMetric(BaseMetric):
    """The segmentation counterpart of :class:`ContextAccuracyMetric`, by pixels: of the pixels of
    objects (label other than ``background`` and ``ignore_index``) predicted as some object class,
    the share predicted as the right one (``context/accuracy``; 0.5 is chance with two balanced
    classes), and the share of object pixels predicted as an object at all (``context/found``)."""

    default_prefix = "context"

    def __init__(self, background: int = 0, ignore_index: int = 255, **kwargs) -> None:
        super().__init__(**kwargs)
        self.background, self.ignore_index = background, ignore_index

    def process(self, data_batch, data_samples) -> None:
        for sample in data_samples:
            pred = sample["pred_sem_seg"]["data"].squeeze(0)
            gt = sample["gt_sem_seg"]["data"].squeeze(0).to(pred.device)
            objects = (gt != self.background) & (gt != self.ignore_index)
            as_object = objects & (pred != self.background)
            self.results.append((int(objects.sum()), int(as_object.sum()), int((as_object & (pred == gt)).sum())))

    def compute_metrics(self, results: list) -> dict[str, float]:
        objects, as_object, right = np.sum(results, axis=0)
        return dict(accuracy=right / as_object if as_object else 0.0, found=as_object / objects if objects else 0.0)
