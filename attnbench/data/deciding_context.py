"""Where each mini-shapes object's class is decided: the pixels of its deciding context, and its centre.

Every rule of :data:`~attnbench.data.mini_shapes.RULES` labels an object by something else in the image,
recorded in the image's COCO entry (``attnbench/data/mini_shapes.py``). For object ``o`` of an image
the *deciding context* ``C_o`` is the set of pixels whose content fixes ``o``'s class (each rule's entry of
``RULES`` computes its own, ``Rule.context``):

``key-stripe``      the key stripe (``key_side``): the object matches its colour or not;
``marker``          the sign's box (``marker_box``): a plus or an x labels every object;
``near-far``        the plus's box (``marker_box``): its offset from the object decides;
``flag``            the flag's box (``flag_box``): its colour labels every object;
``flag-side``       the flag's box (``flag_box``): its colour and its side of the object decide;
``nearest-flag``    the box of the flag nearer to the object (``flag_boxes``, the one of the object's
                    class: ``yellow-nearer`` names the yellow one). The farther flag takes part in the
                    comparison too, but it is the nearer one whose colour the class names, so a query that
                    learnt the rule has to look there, and only there its look differs from the other class's;
``same-different``  the boxes of the object's twins (the other objects of identical shape, colour and
                    size) when it has any (``same``); else of every other object (``different``: every one
                    of them had to be compared to tell).

Signs and objects count by their boxes (``[x, y, w, h]``, the visible pixels' for objects), so a
query that attends to the sign's middle or to a ring's hole looks at the context. An object's centre
is its box's, ``(y + h / 2, x + w / 2)`` in pixels (pixel ``k`` spans ``[k, k + 1)``).

Pure numpy and json, as the generator.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .mini_shapes import DEFAULT_RULE, MARKER, RULES


@dataclass(frozen=True)
class ObjectContext:
    """One object: ``centre`` ``(y, x)`` in image pixels and ``mask`` ``(H, W)`` bool, its deciding context."""

    centre: tuple[float, float]
    mask: np.ndarray


def context_mask(image: dict, annotation: dict, annotations: list[dict], rule: str) -> np.ndarray:
    """``(H, W)`` bool: the deciding context of the object ``annotation`` of ``image`` (COCO entries) under ``rule``."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; choose from {list(RULES)}")
    return RULES[rule].context(image, annotation, annotations)


def object_centre(annotation: dict) -> tuple[float, float]:
    """``(y, x)`` of the centre of the object's box, in pixels."""
    x, y, w, h = annotation["bbox"]
    return y + h / 2, x + w / 2


def deciding_contexts(image: dict, annotations: list[dict], rule: str) -> list[ObjectContext]:
    """Each object of ``image`` (its ``annotations``, COCO entries): its centre and deciding context."""
    return [ObjectContext(object_centre(a), context_mask(image, a, annotations, rule)) for a in annotations]


def dataset_rule(root: str | Path) -> str:
    """The rule a generated mini-shapes folder was drawn under (its ``mini_shapes.json``)."""
    marker = Path(root) / MARKER
    if not marker.is_file():
        raise FileNotFoundError(f"{root} holds no {MARKER}: not a generated mini-shapes folder")
    return json.loads(marker.read_text()).get("rule", DEFAULT_RULE)  # data written before rules existed


def split_contexts(root: str | Path, split: str) -> dict[str, list[ObjectContext]]:
    """File name (``000000.png``) -> its objects' :class:`ObjectContext`, for a split of a generated folder."""
    rule = dataset_rule(root)
    coco = json.loads((Path(root) / "annotations" / f"instances_{split}.json").read_text())
    by_image: dict[int, list[dict]] = {image["id"]: [] for image in coco["images"]}
    for annotation in coco["annotations"]:
        by_image[annotation["image_id"]].append(annotation)
    return {image["file_name"]: deciding_contexts(image, by_image[image["id"]], rule) for image in coco["images"]}
