"""The mini-shapes datasets for mmdet and mmseg, generated into ``data_root`` on first use.

Both read :mod:`attnbench.data.mini_shapes` through OpenMMLab's own loaders, so every transform,
metric and sampler of mmdet/mmseg applies unchanged::

    dict(type='attnbench.MiniShapesDetDataset', data_root='data/mini_shapes',
         ann_file='annotations/instances_train.json', data_prefix=dict(img='images/train/'),
         generate=dict(seed=0), pipeline=...)
    dict(type='attnbench.MiniShapesSegDataset', data_root='data/mini_shapes',
         data_prefix=dict(img_path='img_dir/train', seg_map_path='ann_dir/train'), pipeline=...)

``generate`` holds ``ensure_mini_shapes``'s parameters (num_train, num_val, image_size, seed, rule;
its defaults when left out); every dataset on one ``data_root`` must give the same ones. The class
names are the rule's (``match``/``other`` for the default ``key-stripe``, ``near``/``far``, ...).
"""
from __future__ import annotations

from mmdet.datasets import CocoDataset
from mmseg.datasets import BaseSegDataset

from attnbench.data.mini_shapes import DEFAULT_RULE, RULES, ensure_mini_shapes

from .registry import DATASETS

#: Display colours (OpenMMLab visualisers) of ``match`` and ``other``.
CLASS_COLOURS = [(255, 170, 0), (0, 160, 255)]


class _GeneratedOnFirstUse:
    """Mixin placed before an OpenMMLab dataset: generates ``data_root`` before it is read, and
    names the classes after its rule."""

    def __init__(self, *args, data_root: str, generate: dict | None = None, metainfo: dict | None = None,
                 **kwargs) -> None:
        generate = generate or {}
        self.generate_data(data_root, generate)
        classes = self.label_names(RULES[generate.get("rule", DEFAULT_RULE)].classes)
        super().__init__(*args, data_root=data_root, metainfo={"classes": classes} | (metainfo or {}), **kwargs)

    @staticmethod
    def generate_data(data_root: str, generate: dict | None = None) -> None:
        """Write the data into ``data_root`` unless it is there (``generate``: as the dataset's); the
        config check and the sweep look for this method (attnbench.mm.run_setup.generating_dataset)."""
        ensure_mini_shapes(data_root, **(generate or {}))

    @staticmethod
    def label_names(classes: tuple[str, str]) -> tuple[str, ...]:
        """The dataset's class names, in label order, from the rule's two classes."""
        return classes


@DATASETS.register_module()
class MiniShapesDetDataset(_GeneratedOnFirstUse, CocoDataset):
    """Mini shapes as COCO detection: the rule's two classes (category ids 1 and 2)."""

    METAINFO = {"palette": CLASS_COLOURS}


@DATASETS.register_module()
class MiniShapesSegDataset(_GeneratedOnFirstUse, BaseSegDataset):
    """Mini shapes as semantic segmentation: labels 0 ``background``, 1 and 2 the rule's classes."""

    # no class names here: mmseg remaps labels when a dataset's classes differ from its METAINFO's
    METAINFO = {"palette": [(0, 0, 0), *CLASS_COLOURS]}

    @staticmethod
    def label_names(classes: tuple[str, str]) -> tuple[str, ...]:
        return ("background", *classes)

    def __init__(self, img_suffix: str = ".png", seg_map_suffix: str = ".png", reduce_zero_label: bool = False,
                 **kwargs) -> None:
        super().__init__(img_suffix=img_suffix, seg_map_suffix=seg_map_suffix,
                         reduce_zero_label=reduce_zero_label, **kwargs)
