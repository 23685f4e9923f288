"""Mini shapes: small seeded detection and segmentation datasets whose labels need spatial context.

Each image is a square RGB canvas with a textured grey background (a smooth random field plus a
grating of random period and orientation, plus pixel noise) on which sit a few objects: a filled
disc, a ring or a square frame (ring and frame 1/5 of their size thick, at least 2 px), each 3/32 to
7/16 of the side long (12 to 56 px at the default 128) and painted in a colour of :data:`PALETTE`.
Every rule of :data:`RULES` decides an object's class (one of two) by a relation to something else
in the image, never by the object's own pixels: every shape in every colour is each class about
equally often, so a detector must carry the context to the object. The rules, each aimed at one
kind of context (one term of the generalized attention, see ``docs/diagnostics.md``):

``key-stripe`` (the default, the mini-shapes task of the study): a *key* stripe, ``image_size // 32``
    px wide (at least 2), runs along one border in a palette colour; 1 to 4 objects, each ``match``
    when its colour is the key's (probability 1/2), else ``other``. The key can be the whole image
    away. Query content against key content (E1), or a salient key broadcast to every query (E3).
``marker``: a small near-white sign, 3/32 of the side, anywhere: a plus in half the images, an
    ``x`` of the same size and colour (as many pixels, give or take a few) in the others; 1 to 4
    objects, all ``marked`` when the plus is there, all ``unmarked`` when the ``x`` is. One salient
    key decides every query alike: key content only (E3), the global context.
``same-different``: 2 to 4 objects; each later one repeats an earlier one's shape, colour and size
    with probability 1/2, else takes a (shape, colour) not yet in the image. An object is ``same``
    when another object of the image is identical, ``different`` when none is: query content against
    key content (E1), the comparison CNNs are known to fail (Kim, Ricci and Serre, 2018).
``near-far``: one object and one near-white plus: ``near`` when the plus comes within 1/8 of the
    side of the object's square (16 px at 128), ``far`` when it stays beyond 1/4 (32 px), with
    probability 1/2 whatever the object's look, size and place (a place is kept only if the plus
    fits there at both distances; large objects therefore sit off-centre, in both classes alike).
    The plus says where, the offset decides: relative position (E4) with a salient key (E3).
``flag``: a filled square flag, 3/16 of the side (24 px at 128), anywhere, yellow in half the images
    and cyan in the others (colours no object takes); 1 to 4 objects, all ``yellow-flag`` or all
    ``cyan-flag`` by the flag's colour. The ``marker`` rule with the context made as easy to see as
    it can be: the first convolution already tells the two flags apart, so what remains is carrying
    the flag's colour to objects up to the image away. One salient key for every query (E3).
``nearest-flag``: a yellow and a cyan flag, at least 1/4 of the side apart, and 1 to 4 objects, each
    ``yellow-nearer`` or ``cyan-nearer`` by the flag whose centre is nearer to its own (kept only when
    the two distances differ by at least 1/8 of the side, 16 px at 128). Which place gets which colour
    is a coin toss after the places are drawn, so each object is each class with probability 1/2
    whatever its look, size and place. Both flags are in every image, so a context shared by every
    query (E3, global pooling) cannot tell; the query's position relative to the keys must (E4, or E2).
``flag-side``: one flag, anywhere, and 1 to 4 objects, each wholly to the left or to the right of it
    with at least 1/8 of the side (16 px at 128) between the flag's box and the object's square. A
    yellow flag says "left", a cyan one "right": an object ``agrees`` when the flag lies on the side
    its colour says, else ``disagrees``. The colour is a coin toss after the places are drawn, so each
    object is each class with probability 1/2 whatever its look, size and place, and objects on the two
    sides of one flag take opposite classes: neither the flag's colour (E3, global pooling) nor the
    side alone tells; the flag's colour weighed by its direction from the query does (E4, or E2).

Objects stay ``2 * image_size // 32`` px clear of every border and clear of the marker. They may
overlap (later ones on top) as long as every object keeps at least :data:`MIN_VISIBLE` of its
pixels; an object's box, area and mask are those of its *visible* pixels. Edges are hard (no
anti-aliasing), so the label maps carry no ignore value: every pixel is 0 (background, key and
marker included) or the class id.

``make_mini_shapes(root, ..., rule=...)`` writes::

    root/images/{train,val}/000000.png              RGB images
    root/annotations/instances_{train,val}.json     COCO: bbox [x, y, w, h], area, iscrowd 0,
                                                    uncompressed-RLE segmentation, category ids 1
                                                    and 2 named by the rule's classes; extra keys:
                                                    each image's context (key_colour and key_side;
                                                    marker and marker_box; flag and flag_box;
                                                    flag_boxes), each object's shape,
                                                    colour and square (the drawn shape's [x, y, w, h])
    root/img_dir -> images                          relative symlink, for mmseg's layout
    root/ann_dir/{train,val}/000000.png             uint8 label maps, 0 background, 1 and 2 the classes
    root/mini_shapes.json                           the generation parameters, written last

Image ``i`` of a split depends only on ``(rule, seed, split, i)``, so more images leave the first
ones unchanged. ``ensure_mini_shapes`` generates on demand, once, from any number of processes.
Pure numpy, Pillow and json: no OpenMMLab (``attnbench.mm.datasets`` wraps it for mmdet and mmseg).
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from itertools import product
from pathlib import Path

import numpy as np
from PIL import Image

from .build_once import build_once

#: The colours an object or the key can take (RGB).
PALETTE = {"red": (215, 45, 40), "green": (40, 170, 60), "blue": (45, 85, 225)}
#: Shape -> (distance from its centre that draws it, whether it is hollow).
SHAPES = {"disc": ("euclidean", False), "ring": ("euclidean", True), "frame": ("chebyshev", True)}
KEY_SIDES = ("top", "bottom", "left", "right")
#: The signs of the ``marker`` and ``near-far`` rules, their colour (RGB) and side (fraction of the image's).
MARKERS = ("plus", "x")
MARKER_COLOUR = (235, 235, 235)
MARKER_SIZE = 3 / 32
#: ``near-far``: an object is near when the plus's box comes within NEAR of the image side of the
#: object's square, far when it stays beyond FAR.
NEAR, FAR = 1 / 8, 1 / 4
#: The flags of the ``flag``, ``nearest-flag`` and ``flag-side`` rules (RGB; colours no object takes) and
#: their side (fraction of the image's). ``nearest-flag`` keeps the flags FAR apart and an object only
#: where its distances to the two differ by NEAR or more; ``flag-side`` keeps every object NEAR or more
#: to the left or to the right of its flag, the side each colour names in FLAG_SIDES.
FLAG_COLOURS = {"yellow": (230, 200, 30), "cyan": (30, 200, 220)}
FLAG_SIZE = 3 / 16
FLAG_SIDES = {"yellow": "left", "cyan": "right"}
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
    category_id: int  # 1 or 2: the rule's first or second class
    square: tuple[int, int, int, int]  # [x, y, w, h] of the whole drawn shape (the box holds its visible part)


@dataclass(frozen=True)
class Scene:
    """One drawn image: ``image`` (S, S, 3) uint8, ``instances`` (S, S) with 0 for background and
    ``i + 1`` where object ``i`` is visible, the objects in drawing order, and what the image's
    context was (recorded in its COCO entry: ``key_colour``, ``marker_box``, ...)."""

    image: np.ndarray
    instances: np.ndarray
    objects: tuple[SceneObject, ...]
    context: dict

    def label_map(self) -> np.ndarray:
        """(S, S) uint8: 0 background, otherwise the category id of the visible object."""
        lut = np.array([0] + [o.category_id for o in self.objects], dtype=np.uint8)
        return lut[self.instances]


def key_width(image_size: int) -> int:
    return max(2, image_size // 32)


def marker_size(image_size: int) -> int:
    return round(MARKER_SIZE * image_size)


def flag_size(image_size: int) -> int:
    return round(FLAG_SIZE * image_size)


def object_size_range(image_size: int) -> tuple[int, int]:
    return round(SIZE_RANGE[0] * image_size), round(SIZE_RANGE[1] * image_size)


def _distances(left: float, top: float, size: float, image_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(1, S) and (S, 1): x and y offsets of the pixel centres from the centre of a ``size`` square."""
    centres = np.arange(image_size) + 0.5
    return centres[None, :] - (left + size / 2), centres[:, None] - (top + size / 2)


def shape_mask(shape: str, left: int, top: int, size: int, image_size: int) -> np.ndarray:
    """(S, S) bool: the pixels (by their centres) of ``shape`` drawn in the ``size`` square at
    (left, top), so its extent is exactly that square."""
    distance, hollow = SHAPES[shape]
    dx, dy = map(np.abs, _distances(left, top, size, image_size))
    d = np.hypot(dx, dy) if distance == "euclidean" else np.maximum(dx, dy)
    radius = size / 2
    inside = d <= radius
    return inside & (d > radius - max(2, round(size / 5))) if hollow else inside


def marker_mask(sign: str, left: int, top: int, size: int, image_size: int) -> np.ndarray:
    """(S, S) bool: a ``plus`` or an ``x`` of bars ``size / 4`` thick filling the ``size`` square at (left, top)."""
    dx, dy = _distances(left, top, size, image_size)
    inside = (np.abs(dx) <= size / 2) & (np.abs(dy) <= size / 2)
    half = size / 8
    if sign == "plus":
        return inside & ((np.abs(dx) <= half) | (np.abs(dy) <= half))
    return inside & ((np.abs(dx - dy) <= half * np.sqrt(2)) | (np.abs(dx + dy) <= half * np.sqrt(2)))


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


def _jittered(rng: np.random.Generator, rgb: tuple[int, int, int]) -> np.ndarray:
    return np.asarray(rgb, dtype=float) + rng.uniform(-COLOUR_JITTER, COLOUR_JITTER, 3)


def _random_look(rng: np.random.Generator) -> tuple[str, str]:
    """A shape and a colour, uniformly."""
    return str(rng.choice(list(SHAPES))), str(rng.choice(list(PALETTE)))


class _Canvas:
    """An image being drawn: its pixels, which object each pixel shows, and the objects placed so far."""

    def __init__(self, rng: np.random.Generator, image_size: int) -> None:
        self.rng, self.size = rng, image_size
        self.image = _background(rng, image_size)
        self.instances = np.zeros((image_size, image_size), dtype=np.int64)
        self.keep_clear = np.zeros((image_size, image_size), dtype=bool)  # the marker and a 2 px rim
        self.placed: list[tuple[str, str, tuple[int, int, int, int]]] = []  # shape, colour, square
        self.full_areas: list[int] = []

    @property
    def margin(self) -> int:
        return 2 * key_width(self.size)

    def random_corner(self, size: int) -> tuple[int, int]:
        """(left, top) of a ``size`` square at a random place clear of the borders."""
        left, top = (int(v) for v in self.rng.integers(self.margin, self.size - self.margin - size + 1, size=2))
        return left, top

    def add_sign(self, mask: np.ndarray, colour: tuple[int, int, int], box: list[int]) -> list[int]:
        """Paint a sign's ``mask`` (inside ``box`` [x, y, w, h]) in ``colour`` and keep objects 2 px
        clear of its box; returns the box."""
        left, top, width, height = box
        self.image[mask] = _jittered(self.rng, colour)
        self.keep_clear[max(0, top - 2):top + height + 2, max(0, left - 2):left + width + 2] = True
        return box

    def add_marker(self, sign: str, left: int | None = None, top: int | None = None) -> list[int]:
        """Paint ``sign`` with its corner at (left, top), or at a random place clear of the borders;
        returns its box [x, y, w, h]."""
        size = marker_size(self.size)
        if left is None:
            left, top = self.random_corner(size)
        return self.add_sign(marker_mask(sign, left, top, size, self.size), MARKER_COLOUR, [left, top, size, size])

    def add_flag(self, colour: str, left: int, top: int) -> list[int]:
        """Paint a flag of ``colour`` (a FLAG_COLOURS name) with its corner at (left, top); returns its box."""
        size = flag_size(self.size)
        mask = np.zeros((self.size, self.size), dtype=bool)
        mask[top:top + size, left:left + size] = True
        return self.add_sign(mask, FLAG_COLOURS[colour], [left, top, size, size])

    def find(self, shape: str, size: int | None = None, accept=None) -> tuple[np.ndarray, tuple] | None:
        """A mask and square [x, y, w, h] of ``shape`` at a random size (or ``size``) and position clear of the
        borders and the marker that leaves every object already drawn at least MIN_VISIBLE of its
        pixels and whose box [x, y, w, h] ``accept`` takes (when given); None when PLACEMENT_TRIES
        positions found none."""
        low, high = object_size_range(self.size)
        for _ in range(PLACEMENT_TRIES):
            side = int(self.rng.integers(low, high + 1)) if size is None else size
            left, top = (int(v) for v in self.rng.integers(self.margin, self.size - self.margin - side + 1, size=2))
            if accept is not None and not accept([left, top, side, side]):
                continue
            mask = shape_mask(shape, left, top, side, self.size)
            visible = np.bincount(self.instances[~mask], minlength=len(self.full_areas) + 1)[1:]
            if not (mask & self.keep_clear).any() and np.all(visible >= MIN_VISIBLE * np.asarray(self.full_areas)):
                return mask, (left, top, side, side)
        return None

    def paint(self, shape: str, colour: str, place: tuple[np.ndarray, tuple]) -> None:
        """Draw ``shape`` in ``colour`` at a ``place`` from :meth:`find`."""
        mask, square = place
        self.instances[mask] = len(self.placed) + 1
        self.image[mask] = _jittered(self.rng, PALETTE[colour])
        self.placed.append((shape, colour, square))
        self.full_areas.append(int(mask.sum()))

    def add(self, shape: str, colour: str, size: int | None = None) -> bool:
        """Paint an object where :meth:`find` puts it; False when it found no place."""
        found = self.find(shape, size)
        if found is not None:
            self.paint(shape, colour, found)
        return found is not None

    def scene(self, category_ids: list[int], context: dict) -> Scene:
        """Add pixel noise and freeze: object ``i`` gets ``category_ids[i]``."""
        image = self.image + self.rng.normal(0.0, PIXEL_NOISE, self.image.shape)
        objects = tuple(SceneObject(shape, colour, category, square)
                        for (shape, colour, square), category in zip(self.placed, category_ids))
        return Scene(np.clip(np.rint(image), 0, 255).astype(np.uint8), self.instances, objects, context)


def _key_stripe_scene(rng: np.random.Generator, image_size: int) -> Scene:
    """``match`` when the object's colour is the key stripe's, else ``other`` (probability 1/2 each)."""
    key_colour, key_side = str(rng.choice(list(PALETTE))), str(rng.choice(KEY_SIDES))
    canvas = _Canvas(rng, image_size)
    canvas.image[key_mask(key_side, image_size)] = _jittered(rng, PALETTE[key_colour])
    category_ids = []
    for _ in range(int(rng.integers(1, MAX_OBJECTS + 1))):
        shape = str(rng.choice(list(SHAPES)))
        matches = rng.random() < 0.5
        colour = key_colour if matches else str(rng.choice([c for c in PALETTE if c != key_colour]))
        if canvas.add(shape, colour):
            category_ids.append(1 if matches else 2)
    return canvas.scene(category_ids, {"key_colour": key_colour, "key_side": key_side})


def _marker_scene(rng: np.random.Generator, image_size: int) -> Scene:
    """Every object ``marked`` when the image's sign is a plus, ``unmarked`` when it is an x."""
    sign = MARKERS[int(rng.integers(len(MARKERS)))]
    canvas = _Canvas(rng, image_size)
    box = canvas.add_marker(sign)
    for _ in range(int(rng.integers(1, MAX_OBJECTS + 1))):
        canvas.add(*_random_look(rng))
    category = MARKERS.index(sign) + 1
    return canvas.scene([category] * len(canvas.placed), {"marker": sign, "marker_box": box})


def _same_different_scene(rng: np.random.Generator, image_size: int) -> Scene:
    """``same`` when another object has the same shape, colour and size, else ``different``."""
    canvas = _Canvas(rng, image_size)
    low, high = object_size_range(image_size)
    drawn: list[tuple[str, str, int]] = []
    for _ in range(int(rng.integers(2, MAX_OBJECTS + 1))):
        if drawn and rng.random() < 0.5:
            identity = drawn[int(rng.integers(len(drawn)))]
        else:
            unused = [look for look in product(SHAPES, PALETTE) if look not in {d[:2] for d in drawn}]
            identity = (*unused[int(rng.integers(len(unused)))], int(rng.integers(low, high + 1)))
        if canvas.add(*identity):
            drawn.append(identity)
    return canvas.scene([1 if drawn.count(d) > 1 else 2 for d in drawn], {})


def _near_far_scene(rng: np.random.Generator, image_size: int) -> Scene:
    """One object, ``near`` when the plus's box comes within NEAR of the side of the object's square,
    ``far`` when it stays beyond FAR. The object's place is kept only when the plus fits there at
    both distances, then the class is a coin toss and the plus goes to a random place of that kind:
    P(near | the object's shape, colour, size and place) = 1/2 exactly, so only the plus tells."""
    canvas = _Canvas(rng, image_size)
    shape, colour = _random_look(rng)
    size = marker_size(image_size)
    corners = np.arange(canvas.margin, image_size - canvas.margin - size + 1)
    lefts, tops = np.meshgrid(corners, corners, indexing="xy")
    while True:
        mask, square = canvas.find(shape)  # an empty canvas always has room
        x, y, w, h = square
        gaps = np.hypot(np.maximum.reduce([x - (lefts + size), lefts - (x + w), np.zeros_like(lefts)]),
                        np.maximum.reduce([y - (tops + size), tops - (y + h), np.zeros_like(tops)]))
        # at least 2 px between the plus and the object's square, as between every marker and object
        places = [np.flatnonzero((gaps >= 2) & (gaps <= NEAR * image_size)),
                  np.flatnonzero(gaps >= FAR * image_size)]
        if all(len(p) for p in places):
            break
    category = int(rng.integers(2)) + 1
    chosen = places[category - 1][int(rng.integers(len(places[category - 1])))]
    canvas.paint(shape, colour, (mask, square))
    box = canvas.add_marker("plus", int(lefts.flat[chosen]), int(tops.flat[chosen]))
    return canvas.scene([category], {"marker": "plus", "marker_box": box})


def _flag_scene(rng: np.random.Generator, image_size: int) -> Scene:
    """Every object ``yellow-flag`` or ``cyan-flag`` by the colour of the image's one flag."""
    colour = list(FLAG_COLOURS)[int(rng.integers(len(FLAG_COLOURS)))]
    canvas = _Canvas(rng, image_size)
    box = canvas.add_flag(colour, *canvas.random_corner(flag_size(image_size)))
    for _ in range(int(rng.integers(1, MAX_OBJECTS + 1))):
        canvas.add(*_random_look(rng))
    category = list(FLAG_COLOURS).index(colour) + 1
    return canvas.scene([category] * len(canvas.placed), {"flag": colour, "flag_box": box})


def _centre(box) -> np.ndarray:
    return np.asarray(box[:2], dtype=float) + np.asarray(box[2:], dtype=float) / 2


def _nearest_flag_scene(rng: np.random.Generator, image_size: int) -> Scene:
    """Two flags FAR apart (their boxes' gap), colours given to the two places by a coin toss; each
    object the class of the flag whose centre is nearer to its square's, kept only when the two
    distances differ by NEAR or more (of the side)."""
    canvas = _Canvas(rng, image_size)
    size = flag_size(image_size)
    while True:
        first, second = canvas.random_corner(size), canvas.random_corner(size)
        if max(abs(first[0] - second[0]), abs(first[1] - second[1])) - size >= FAR * image_size:
            break
    colours = list(FLAG_COLOURS)
    if rng.random() < 0.5:
        colours.reverse()
    boxes = {colour: canvas.add_flag(colour, *corner) for colour, corner in zip(colours, (first, second))}
    centres = {colour: _centre(box) for colour, box in boxes.items()}

    def distances(square) -> list[float]:
        """From the square's centre to each flag's, in FLAG_COLOURS order."""
        return [np.hypot(*(_centre(square) - centres[c])) for c in FLAG_COLOURS]

    def decided(square) -> bool:
        yellow, cyan = distances(square)
        return abs(yellow - cyan) >= NEAR * image_size

    category_ids, wanted, tries = [], int(rng.integers(1, MAX_OBJECTS + 1)), 0
    while tries < wanted or not category_ids:  # every image holds an object
        tries += 1
        shape, colour = _random_look(rng)
        found = canvas.find(shape, accept=decided)
        if found is not None:
            canvas.paint(shape, colour, found)
            category_ids.append(int(np.argmin(distances(found[1]))) + 1)
    return canvas.scene(category_ids, {"flag_boxes": boxes})


def flag_side(flag_box, square, gap: float) -> str | None:
    """``'left'`` or ``'right'``: where the flag's box [x, y, w, h] lies from an object's square, with at
    least ``gap`` px between them along x; None when it lies neither way."""
    flag_left, _, flag_width, _ = flag_box
    left, _, width, _ = square
    if flag_left + flag_width + gap <= left:
        return "left"
    if left + width + gap <= flag_left:
        return "right"
    return None


def _flag_side_scene(rng: np.random.Generator, image_size: int) -> Scene:
    """One flag; each object NEAR or more wholly to its left or right, ``agree`` when the flag lies on
    the side its colour names (FLAG_SIDES), else ``disagree``. The colour is independent of the places,
    so P(agree | an object's look, size and place) = 1/2."""
    colour = list(FLAG_COLOURS)[int(rng.integers(len(FLAG_COLOURS)))]
    canvas = _Canvas(rng, image_size)
    box = canvas.add_flag(colour, *canvas.random_corner(flag_size(image_size)))

    def side(square) -> str | None:
        return flag_side(box, square, NEAR * image_size)

    category_ids, wanted, tries = [], int(rng.integers(1, MAX_OBJECTS + 1)), 0
    while tries < wanted or not category_ids:  # every image holds an object
        tries += 1
        shape, look = _random_look(rng)
        found = canvas.find(shape, accept=lambda square: side(square) is not None)
        if found is not None:
            canvas.paint(shape, look, found)
            category_ids.append(1 if side(found[1]) == FLAG_SIDES[colour] else 2)
    return canvas.scene(category_ids, {"flag": colour, "flag_box": box})


def box_mask(boxes: list, height: int, width: int) -> np.ndarray:
    """``(height, width)`` bool: the pixels inside any of the ``[x, y, w, h]`` ``boxes``."""
    mask = np.zeros((height, width), dtype=bool)
    for x, y, w, h in boxes:
        mask[max(0, y):y + h, max(0, x):x + w] = True
    return mask


def _identity(annotation: dict) -> tuple:
    """What ``same-different`` compares: shape, colour and the drawn square's size."""
    return annotation["shape"], annotation["colour"], annotation["square"][2]


def _twins_or_others(image: dict, annotation: dict, annotations: list[dict]) -> list:
    others = [a for a in annotations if a["id"] != annotation["id"]]
    twins = [a for a in others if _identity(a) == _identity(annotation)]
    return [a["bbox"] for a in (twins or others)]


def _boxes(select: Callable[[dict, dict, list[dict]], list]) -> Callable[[dict, dict, list[dict]], np.ndarray]:
    """A context of boxes: the mask of the boxes ``select`` picks."""
    return lambda image, annotation, annotations: box_mask(
        select(image, annotation, annotations), image["height"], image["width"])


def _key_stripe_context(image: dict, annotation: dict, annotations: list[dict]) -> np.ndarray:
    return key_mask(image["key_side"], image["height"])


def _nearest_flag_boxes(image: dict, annotation: dict, annotations: list[dict]) -> list:
    return [image["flag_boxes"][list(FLAG_COLOURS)[annotation["category_id"] - 1]]]


def _marker_boxes(image: dict, annotation: dict, annotations: list[dict]) -> list:
    return [image["marker_box"]]


def _flag_boxes(image: dict, annotation: dict, annotations: list[dict]) -> list:
    return [image["flag_box"]]


@dataclass(frozen=True)
class Rule:
    """How a rule names its two classes, draws a scene that decides them, and where an object's class is
    decided: ``context(image, annotation, annotations)``, the ``(H, W)`` bool mask of one object's deciding
    context from its image's COCO entry, its annotation and all the image's (attnbench.data.deciding_context
    says which pixels each rule's is)."""

    classes: tuple[str, str]
    draw: Callable[[np.random.Generator, int], Scene]
    context: Callable[[dict, dict, list[dict]], np.ndarray]


#: rule -> its classes (category ids 1 and 2), its drawing (the module docstring describes each) and its
#: deciding context.
RULES = {
    "key-stripe": Rule(("match", "other"), _key_stripe_scene, _key_stripe_context),
    "marker": Rule(("marked", "unmarked"), _marker_scene, _boxes(_marker_boxes)),
    "same-different": Rule(("same", "different"), _same_different_scene, _boxes(_twins_or_others)),
    "near-far": Rule(("near", "far"), _near_far_scene, _boxes(_marker_boxes)),
    "flag": Rule(("yellow-flag", "cyan-flag"), _flag_scene, _boxes(_flag_boxes)),
    "nearest-flag": Rule(("yellow-nearer", "cyan-nearer"), _nearest_flag_scene, _boxes(_nearest_flag_boxes)),
    "flag-side": Rule(("agree", "disagree"), _flag_side_scene, _boxes(_flag_boxes)),
}
DEFAULT_RULE = "key-stripe"
#: The default rule's class names.
CLASSES = RULES[DEFAULT_RULE].classes


def generation_params(num_train: int = NUM_TRAIN, num_val: int = NUM_VAL, image_size: int = IMAGE_SIZE,
                      seed: int = 0, rule: str = DEFAULT_RULE) -> dict:
    """The checked parameters, as recorded in ``root/mini_shapes.json``."""
    for name, value, low in (("num_train", num_train, 1), ("num_val", num_val, 1),
                             ("image_size", image_size, MIN_IMAGE_SIZE), ("seed", seed, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; choose from {list(RULES)}")
    return {"format_version": FORMAT_VERSION, "num_train": num_train, "num_val": num_val,
            "image_size": image_size, "seed": seed, "rule": rule}


def render_scene(rng: np.random.Generator, image_size: int, rule: str = DEFAULT_RULE) -> Scene:
    """Draw one image under ``rule``: background, the rule's context, then its objects (fewer
    when the later ones find no place that keeps the earlier ones visible enough), then pixel noise."""
    return RULES[rule].draw(rng, image_size)


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
            "iscrowd": 0, "segmentation": mask_to_rle(visible), "shape": obj.shape, "colour": obj.colour,
            "square": list(obj.square)})
    return annotations


def _write_split(root: Path, split: str, num_images: int, image_size: int, seed: int, rule: str) -> dict[str, int]:
    """Draw and write one split; returns its image count and object count per class."""
    classes = RULES[rule].classes
    image_dir, label_dir = root / "images" / split, root / "ann_dir" / split
    image_dir.mkdir(parents=True)
    label_dir.mkdir(parents=True)
    categories = [{"id": i + 1, "name": c, "supercategory": "shape"} for i, c in enumerate(classes)]
    coco: dict = {"info": {"description": f"attnbench mini shapes, rule {rule}, {split}, seed {seed}"}, "licenses": [],
                  "images": [], "annotations": [], "categories": categories}
    for index in range(num_images):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(SPLITS.index(split), index)))
        scene = render_scene(rng, image_size, rule)
        file_name = f"{index:06d}.png"
        Image.fromarray(scene.image).save(image_dir / file_name)
        Image.fromarray(scene.label_map()).save(label_dir / file_name)
        image_id = index + 1
        coco["images"].append({"id": image_id, "file_name": file_name, "height": image_size, "width": image_size,
                               **scene.context})
        coco["annotations"] += _annotations(scene, image_id, len(coco["annotations"]) + 1)
    (root / "annotations").mkdir(exist_ok=True)
    (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(coco))
    labels = [a["category_id"] for a in coco["annotations"]]
    return {"images": num_images, **{c: labels.count(i + 1) for i, c in enumerate(classes)}}


def make_mini_shapes(root: str | os.PathLike, num_train: int = NUM_TRAIN, num_val: int = NUM_VAL,
                     image_size: int = IMAGE_SIZE, seed: int = 0,
                     rule: str = DEFAULT_RULE) -> dict[str, dict[str, int]]:
    """Write the dataset into ``root`` (created if missing; must be empty). Returns, per split, the
    number of images and of objects per class."""
    params = generation_params(num_train, num_val, image_size, seed, rule)
    root = Path(root)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty; make_mini_shapes writes only into a new or empty folder")
    root.mkdir(parents=True, exist_ok=True)
    summary = {split: _write_split(root, split, n, image_size, seed, rule)
               for split, n in zip(SPLITS, (num_train, num_val))}
    (root / "img_dir").symlink_to("images", target_is_directory=True)
    (root / MARKER).write_text(json.dumps(params, indent=1))
    return summary


def _is_generated(root: Path, params: dict) -> bool:
    """True when ``root`` holds data generated with ``params``, False when it is missing or empty.
    Raises when it holds other data."""
    marker = root / MARKER
    if marker.is_file():
        found = {"rule": DEFAULT_RULE} | json.loads(marker.read_text())  # data written before rules existed
        if found != params:
            raise ValueError(f"{root} holds mini shapes generated with {found}, not the requested {params}; "
                             f"delete that folder to regenerate it, or use another data_root")
        return True
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty but has no {MARKER} (an interrupted copy, or other data); "
                              f"delete it or use another data_root")
    return False


def ensure_mini_shapes(root: str | os.PathLike, num_train: int = NUM_TRAIN, num_val: int = NUM_VAL,
                       image_size: int = IMAGE_SIZE, seed: int = 0, rule: str = DEFAULT_RULE) -> Path:
    """Generate the dataset into ``root`` unless it is there already with the same parameters, safe
    from many processes at once (:func:`~attnbench.data.build_once.build_once`). Raises ValueError if
    ``root`` was generated with other parameters and FileExistsError if it holds something else.
    """
    params = generation_params(num_train, num_val, image_size, seed, rule)
    return build_once(root, lambda folder: _is_generated(folder, params),
                      lambda tmp: make_mini_shapes(tmp, num_train, num_val, image_size, seed, rule))
