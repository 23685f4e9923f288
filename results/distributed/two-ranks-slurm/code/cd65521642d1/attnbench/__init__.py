"""attnbench: an empirical spatial-attention ablation benchmark.

The attention mechanisms live in :mod:`attnbench.attention` (pure PyTorch). The OpenMMLab
adapters, models and data code import them, never the other way round, so ``import attnbench``
does not import OpenMMLab.
"""
__version__ = "0.1.0"
