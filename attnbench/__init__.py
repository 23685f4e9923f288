"""attnbench: an empirical spatial-attention ablation benchmark.

The attention mechanisms live in :mod:`attnbench.attention` (pure PyTorch). The OpenMMLab
adapters, models and data code import them, never the other way round, so ``import attnbench``
does not import OpenMMLab.
"""
import warnings

# mmengine 0.10.7 and mmcv 2.1.0 import pkg_resources (deprecated, still needed; see tools/setup.sh): filtered
# here, before any entry point imports them
warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)

__version__ = "0.1.0"
