"""Where an image's pixels sit on an attention block's query and key grids, through mmdet/mmseg's
resizing and padding.

An ``H x W`` image enters the network resized by ``scale = (s_y, s_x)`` (the pipeline's ``scale_factor``;
1 without a Resize, as in the mini-shapes configs) to ``img_shape`` and padded at the bottom and the
right to the batch's ``H_in x W_in`` (the data preprocessor's). A block whose input feature map is
``h x w`` has the stride ``r_y = H_in / h`` (and ``r_x = W_in / w``) input pixels, read from the shapes.
Feature cell ``(p, q)`` covers input pixels ``[p r_y, (p + 1) r_y) x [q r_x, (q + 1) r_x)``; then

    query:  image point (y, x) -> feature cell (floor(y s_y / r_y), floor(x s_x / r_x)) -> the query of
            the grid ``x[:, :, ::q_stride, ::q_stride]`` at (floor(p / q_stride), floor(q / q_stride));
    key:    key (a, b) of the grid ``x[:, :, ::kv, ::kv]`` stands for the ``kv x kv`` feature cells it
            subsamples, the input pixels [a kv r_y, (a + 1) kv r_y) x [b kv r_x, (b + 1) kv r_x) (clipped to
            the input), so the keys tile the input; its coverage of an image mask ``M`` is the fraction
            of those pixels inside ``M`` (padding is outside every mask).

The mean coverage over the keys is then M's share of the input: the weight uniform attention puts on
``M``. Exact when the feature map divides the input (mmdet pads to multiples of 32; the mini-shapes
images are 128 px): otherwise adaptive average pooling's overlapping cells stand in for the strides.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class InputFrame:
    """How one image sits in the network's input: ``scale`` ``(s_y, s_x)``, its resized ``image_shape``
    and the padded ``input_shape`` (both ``(height, width)``)."""

    scale: tuple[float, float]
    image_shape: tuple[int, int]
    input_shape: tuple[int, int]

    @classmethod
    def of(cls, metainfo: dict, input_shape: tuple[int, int]) -> InputFrame:
        """From a data sample's ``metainfo`` (OpenMMLab: ``scale_factor`` is ``(w, h)``; ``img_shape``)
        and the batch's ``(H_in, W_in)``."""
        w_scale, h_scale = metainfo.get("scale_factor", (1.0, 1.0))
        image_shape = tuple(metainfo.get("img_shape", input_shape))[:2]
        return cls((float(h_scale), float(w_scale)), image_shape, tuple(input_shape))


def stride(frame: InputFrame, feature_shape: tuple[int, int]) -> tuple[float, float]:
    """``(r_y, r_x)``: input pixels per feature cell."""
    return frame.input_shape[0] / feature_shape[0], frame.input_shape[1] / feature_shape[1]


def query_indices(points: list[tuple[float, float]], frame: InputFrame, feature_shape: tuple[int, int],
                  q_stride: int) -> torch.Tensor:
    """Flat, row-major indices into the query grid (``ceil(h / q_stride) x ceil(w / q_stride)``) of the
    queries at the image ``points`` ``(y, x)`` (pixels of the image before resizing), int64."""
    (r_y, r_x), (s_y, s_x) = stride(frame, feature_shape), frame.scale
    h, w = feature_shape
    width = -(-w // q_stride)
    indices = []
    for y, x in points:
        row = min(max(int(y * s_y // r_y), 0), h - 1) // q_stride
        column = min(max(int(x * s_x // r_x), 0), w - 1) // q_stride
        indices.append(row * width + column)
    return torch.tensor(indices, dtype=torch.int64)


def input_mask(mask: np.ndarray, frame: InputFrame) -> torch.Tensor:
    """``(H_in, W_in)`` float: an image's bool ``mask`` resized as the image was (nearest) and padded."""
    resized = torch.from_numpy(np.ascontiguousarray(mask)).float()
    if tuple(resized.shape) != frame.image_shape:
        resized = F.interpolate(resized[None, None], size=frame.image_shape, mode="nearest")[0, 0]
    height, width = frame.input_shape
    return F.pad(resized, (0, width - resized.shape[1], 0, height - resized.shape[0]))


def key_coverage(mask: torch.Tensor, feature_shape: tuple[int, int], kv_stride: int) -> torch.Tensor:
    """``(Hk * Wk,)``: each key's share of its input pixels inside ``mask`` (``(..., H_in, W_in)`` float from
    :func:`input_mask`; leading axes kept), keys row-major on the grid of stride ``kv_stride``."""
    cells = F.adaptive_avg_pool2d(mask.reshape(-1, 1, *mask.shape[-2:]), feature_shape)  # per feature cell
    keys = F.avg_pool2d(cells, kv_stride, stride=kv_stride, ceil_mode=True)  # partial tiles: their cells only
    return keys.reshape(*mask.shape[:-2], -1)


def key_tile(frame: InputFrame, feature_shape: tuple[int, int], kv_stride: int) -> tuple[float, float]:
    """``(height, width)`` in image pixels (before resizing) of the tile a key stands for."""
    (r_y, r_x), (s_y, s_x) = stride(frame, feature_shape), frame.scale
    return kv_stride * r_y / s_y, kv_stride * r_x / s_x
