"""Mini shapes: small seeded detection and segmentation datasets whose labels need spatial context.

Each image is a square RGB canvas with a textured grey background (a smooth random field plus a
grating of random period and orientation, plus pixel noise). A *key* stripe, ``image_size // 32``
pixels wide (at least 2), runs along one border chosen at random, in one colour of :data:`PALETTE`.
On it sit 1 to 4 objects: a filled disc, a ring or a square frame (ring and frame 1/5 of their size
thick, at least 2 px), each 3/32 to 7/16 of the side long (12 to 56 px at the default 128) and
painted in a palette colour. An object is ``match`` when its colour is the key's and ``other`` when
not. Half the objects match, the rest take one of the other colours, so every colour and shape is
``match`` as often as ``other``: an object's own pixels say nothing about its class, which only the
key stripe, up to the whole image away, decides. Large rings and frames also extend past a local
patch, so their boxes need the whole outline.

Objects stay twice the key's width clear of every border, so never touch the key. They may
overlap (later ones on top) as long as every object keeps at least :data:`MIN_VISIBLE` of its
pixels; an object's box, area and mask are those of its *visible* pixels. Edges are hard (no
anti-aliasing), so the label maps carry no ignore value: every pixel is 0 (background, key stripe
included) or the class id.

``make_mini_shapes(root, ...)`` writes::

    root/images/{train,val}/000000.png              RGB images
    root/annotations/instances_{train,val}.json     COCO: bbox [x, y, w, h], area, iscrowd 0,
                                                    uncompressed-RLE segmentation, category ids
                                                    1 'match' and 2 'other'; extra keys: each
                                                    image's key_colour and key_side, each
                                                    object's shape and colour
    root/img_dir -> images                          relative symlink, for mmseg's layout
    root/ann_dir/{train,val}/000000.png             uint8 label maps, 0 background, 1 match, 2 other
    root/mini_shapes.json                           the generation parameters, written last

Image ``i`` of a split depends only on ``(seed, split, i)``, so more images leave the first ones
unchanged. ``ensure_mini_shapes`` generates on demand, once, from any number of processes.
Pure numpy, Pillow and json: no OpenMMLab (``attnbench.mm.datasets`` wraps it for mmdet and mmseg).
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from filelock import FileLock
from PIL import Image

#: Class names in category-id / label order (COCO category id and label map value = index + 1).
CLASSES = ("match", "other")
#: The colours an object or the key can take (RGB).
PALETTE = {"red": (215, 45, 40), "green": (40, 170, 60), "blue": (45, 85, 225)}
#: Shape -> (distance from its centre that draws it, whether it is hollow).
SHAPES = {"disc": ("euclidean", False), "ring": ("euclidean", True), "frame": ("chebyshev", True)}
KEY_SIDES = ("top", "bottom", "left", "right")
SPLITS = ("train", "val")

NUM_TRAIN = 400
NUM_VAL = 100
IMAGE_SIZE = 128
MIN_IMAGE_SIZE = 32
MAX_OBJECTS = 4
#: Smallest and largest object, as fractions of the image side (12 and 56 px at 128).
SIZE_RANGE = (3 / 32, 7 / 16)
#: Fraction of its pixels an object keeps in sight when later objects overlap it.
MIN_VISIBLE = 0.6
PLACEMENT_TRIES = 20
#: Colour jitter (uniform, per channel) of each object and the key, and pixel noise (std).
COLOUR_JITTER = 20.0
PIXEL_NOISE = 6.0

MARKER = "mini_shapes.json"
#: Bumped whenever the drawing changes, so data from an older generator is not taken as current.
FORMAT_VERSION = 1


@dataclass(frozen=True)
class SceneObject:
    """What one object is; where it is lives in :attr:`Scene.instances`."""

    shape: str
    colour: str
    category_id: int  # 1 match, 2 other


@dataclass(frozen=True)
class Scene:
    """One drawn image: ``image`` (S, S, 3) uint8, ``instances`` (S, S) with 0 for background and
    ``i + 1`` where object ``i`` is visible, and the objects in drawing order."""

    image: np.ndarray
    instances: np.ndarray
    objects: tuple[SceneObject, ...]
    key_colour: str
    key_side: str

    def label_map(self) -> np.ndarray:
        """(S, S) uint8: 0 background, otherwise the category id of the visible object."""
        lut = np.array([0] + [o.category_id for o in self.objects], dtype=np.uint8)
        return lut[self.instances]


def generation_params(num_train: int = NUM_TRAIN, num_val: int = NUM_VAL, image_size: int = IMAGE_SIZE,
                      seed: int = 0) -> dict[str, int]:
    """The checked parameters, as recorded in ``root/mini_shapes.json``."""
    for name, value, low in (("num_train", num_train, 1), ("num_val", num_val, 1),
                             ("image_size", image_size, MIN_IMAGE_SIZE), ("seed", seed, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return {"format_version": FORMAT_VERSION, "num_train": num_train, "num_val": num_val,
            "image_size": image_size, "seed": seed}


def key_width(image_size: int) -> int:
    return max(2, image_size // 32)


def object_size_range(image_size: int) -> tuple[int, int]:
    return round(SIZE_RANGE[0] * image_size), round(SIZE_RANGE[1] * image_size)


def shape_mask(shape: str, left: int, top: int, size: int, image_size: int) -> np.ndarray:
    """(S, S) bool: the pixels (by their centres) of ``shape`` drawn in the ``size`` square at
    (left, top), so its extent is exactly that square."""
    distance, hollow = SHAPES[shape]
    centres = np.arange(image_size) + 0.5
    dx = np.abs(centres[None, :] - (left + size / 2))
    dy = np.abs(centres[:, None] - (top + size / 2))
    d = np.hypot(dx, dy) if distance == "euclidean" else np.maximum(dx, dy)
    radius = size / 2
    inside = d <= radius
    return inside & (d > radius - max(2, round(size / 5))) if hollow else inside


def key_mask(side: str, image_size: int) -> np.ndarray:
    """(S, S) bool: the key stripe along ``side``."""
    mask = np.zeros((image_size, image_size), dtype=bool)
    w = key_width(image_size)
    region = {"top": (slice(0, w), slice(None)), "bottom": (slice(-w, None), slice(None)),
              "left": (slice(None), slice(0, w)), "right": (slice(None), slice(-w, None))}[side]
    mask[region] = True
    return mask


def _smooth_field(rng: np.random.Generator, image_size: int, cells: int, std: float) -> np.ndarray:
    """(S, S) float32: a ``cells x cells`` grid of N(0, std) values upsampled bicubically."""
    grid = Image.fromarray(rng.normal(0.0, std, (cells, cells)).astype(np.float32))
    return np.asarray(grid.resize((image_size, image_size), Image.Resampling.BICUBIC))


def _grating(rng: np.random.Generator, image_size: int) -> np.ndarray:
    """(S, S): a sinusoid of random amplitude, period (5..16 px), orientation and phase."""
    angle, phase = rng.uniform(0.0, np.pi), rng.uniform(0.0, 2 * np.pi)
    amplitude, period = rng.uniform(4.0, 14.0), rng.uniform(5.0, 16.0)
    y, x = np.mgrid[0:image_size, 0:image_size]
    return amplitude * np.sin(2 * np.pi * (x * np.cos(angle) + y * np.sin(angle)) / period + phase)


def _background(rng: np.random.Generator, image_size: int) -> np.ndarray:
    """(S, S, 3) float: a grey texture with a slight random tint."""
    grey = rng.uniform(70.0, 180.0) + _smooth_field(rng, image_size, 6, 22.0) + _grating(rng, image_size)
    return grey[..., None] + rng.normal(0.0, 5.0, 3)


def _jittered(rng: np.random.Generator, colour: str) -> np.ndarray:
    return np.asarray(PALETTE[colour], dtype=float) + rng.uniform(-COLOUR_JITTER, COLOUR_JITTER, 3)


def _draw_object(rng: np.random.Generator, key_colour: str) -> SceneObject:
    """A random shape, matching the key with probability 1/2, else in another palette colour."""
    shape = str(rng.choice(list(SHAPES)))
    if rng.random() < 0.5:
        return SceneObject(shape, key_colour, CLASSES.index("match") + 1)
    colour = str(rng.choice([c for c in PALETTE if c != key_colour]))
    return SceneObject(shape, colour, CLASSES.index("other") + 1)


def _place(rng: np.random.Generator, shape: str, instances: np.ndarray,
           full_areas: list[int]) -> np.ndarray | None:
    """The mask of ``shape`` at a random size and position clear of the borders that leaves every
    object already in ``instances`` at least MIN_VISIBLE of its ``full_areas``; None if none found."""
    image_size = instances.shape[0]
    margin = 2 * key_width(image_size)
    low, high = object_size_range(image_size)
    for _ in range(PLACEMENT_TRIES):
        size = int(rng.integers(low, high + 1))
        left, top = rng.integers(margin, image_size - margin - size + 1, size=2)
        mask = shape_mask(shape, int(left), int(top), size, image_size)
        visible = np.bincount(instances[~mask], minlength=len(full_areas) + 1)[1:]
        if np.all(visible >= MIN_VISIBLE * np.asarray(full_areas)):
            return mask
    return None


def render_scene(rng: np.random.Generator, image_size: int) -> Scene:
    """Draw one image: background, key stripe, then 1..MAX_OBJECTS objects (fewer when the later
    ones find no place that keeps the earlier ones visible enough), then pixel noise."""
    key_colour, key_side = str(rng.choice(list(PALETTE))), str(rng.choice(KEY_SIDES))
    image = _background(rng, image_size)
    image[key_mask(key_side, image_size)] = _jittered(rng, key_colour)
    instances = np.zeros((image_size, image_size), dtype=np.int64)
    objects: list[SceneObject] = []
    full_areas: list[int] = []
    for _ in range(int(rng.integers(1, MAX_OBJECTS + 1))):
        obj = _draw_object(rng, key_colour)
        mask = _place(rng, obj.shape, instances, full_areas)
        if mask is None:
            continue
        instances[mask] = len(objects) + 1
        image[mask] = _jittered(rng, obj.colour)
        objects.append(obj)
        full_areas.append(int(mask.sum()))
    image += rng.normal(0.0, PIXEL_NOISE, image.shape)
    return Scene(np.clip(np.rint(image), 0, 255).astype(np.uint8), instances, tuple(objects), key_colour, key_side)


def mask_to_rle(mask: np.ndarray) -> dict:
    """COCO uncompressed RLE of a (H, W) bool mask: run lengths, column-major, zeros first."""
    flat = mask.ravel(order="F")
    bounds = np.concatenate([[0], np.flatnonzero(flat[1:] != flat[:-1]) + 1, [flat.size]])
    counts = np.diff(bounds).tolist()
    return {"size": list(mask.shape), "counts": [0, *counts] if flat[0] else counts}


def _annotations(scene: Scene, image_id: int, first_id: int) -> list[dict]:
    """COCO annotations of the scene's objects (their visible pixels), ids from ``first_id``."""
    annotations = []
    for i, obj in enumerate(scene.objects):
        visible = scene.instances == i + 1
        ys, xs = np.nonzero(visible)
        x, y = int(xs.min()), int(ys.min())
        annotations.append({
            "id": first_id + i, "image_id": image_id, "category_id": obj.category_id,
            "bbox": [x, y, int(xs.max()) + 1 - x, int(ys.max()) + 1 - y], "area": int(visible.sum()),
            "iscrowd": 0, "segmentation": mask_to_rle(visible), "shape": obj.shape, "colour": obj.colour})
    return annotations


def _write_split(root: Path, split: str, num_images: int, image_size: int, seed: int) -> dict[str, int]:
    """Draw and write one split; returns its image count and object count per class."""
    image_dir, label_dir = root / "images" / split, root / "ann_dir" / split
    image_dir.mkdir(parents=True)
    label_dir.mkdir(parents=True)
    categories = [{"id": i + 1, "name": c, "supercategory": "shape"} for i, c in enumerate(CLASSES)]
    coco: dict = {"info": {"description": f"attnbench mini shapes, {split}, seed {seed}"}, "licenses": [],
                  "images": [], "annotations": [], "categories": categories}
    for index in range(num_images):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(SPLITS.index(split), index)))
        scene = render_scene(rng, image_size)
        file_name = f"{index:06d}.png"
        Image.fromarray(scene.image).save(image_dir / file_name)
        Image.fromarray(scene.label_map()).save(label_dir / file_name)
        image_id = index + 1
        coco["images"].append({"id": image_id, "file_name": file_name, "height": image_size, "width": image_size,
                               "key_colour": scene.key_colour, "key_side": scene.key_side})
        coco["annotations"] += _annotations(scene, image_id, len(coco["annotations"]) + 1)
    (root / "annotations").mkdir(exist_ok=True)
    (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(coco))
    labels = [a["category_id"] for a in coco["annotations"]]
    return {"images": num_images, **{c: labels.count(i + 1) for i, c in enumerate(CLASSES)}}


def make_mini_shapes(root: str | os.PathLike, num_train: int = NUM_TRAIN, num_val: int = NUM_VAL,
                     image_size: int = IMAGE_SIZE, seed: int = 0) -> dict[str, dict[str, int]]:
    """Write the dataset into ``root`` (created if missing; must be empty). Returns, per split, the
    number of images and of objects per class."""
    params = generation_params(num_train, num_val, image_size, seed)
    root = Path(root)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty; make_mini_shapes writes only into a new or empty folder")
    root.mkdir(parents=True, exist_ok=True)
    summary = {split: _write_split(root, split, n, image_size, seed)
               for split, n in zip(SPLITS, (num_train, num_val))}
    (root / "img_dir").symlink_to("images", target_is_directory=True)
    (root / MARKER).write_text(json.dumps(params, indent=1))
    return summary


def _is_generated(root: Path, params: dict[str, int]) -> bool:
    """True when ``root`` holds data generated with ``params``, False when it is missing or empty.
    Raises when it holds other data."""
    marker = root / MARKER
    if marker.is_file():
        found = json.loads(marker.read_text())
        if found != params:
            raise ValueError(f"{root} holds mini shapes generated with {found}, not the requested {params}; "
                             f"delete that folder to regenerate it, or use another data_root")
        return True
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty but has no {MARKER} (an interrupted copy, or other data); "
                              f"delete it or use another data_root")
    return False


def ensure_mini_shapes(root: str | os.PathLike, num_train: int = NUM_TRAIN, num_val: int = NUM_VAL,
                       image_size: int = IMAGE_SIZE, seed: int = 0) -> Path:
    """Generate the dataset into ``root`` unless it is there already with the same parameters.

    Safe from many processes at once (distributed ranks): one generates under the file lock
    ``<root>.lock`` into a temporary sibling folder that it then renames to ``root``, so ``root``
    is complete whenever it exists; should the lock not hold (some network file systems), the
    rename still lets only one copy through. Raises ValueError if ``root`` was generated with
    other parameters and FileExistsError if it holds something else.
    """
    params = generation_params(num_train, num_val, image_size, seed)
    root = Path(root)
    if _is_generated(root, params):
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{root}.lock"):
        if _is_generated(root, params):
            return root
        tmp = root.parent / f".{root.name}.tmp-{uuid.uuid4().hex}"  # mkdtemp's 0o700 would stick to root
        try:
            make_mini_shapes(tmp, num_train, num_val, image_size, seed)
            try:
                tmp.rename(root)
            except OSError:  # another node won the race without seeing our lock
                if not _is_generated(root, params):
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return root
