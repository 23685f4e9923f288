"""attnbench: an empirical spatial-attention ablation benchmark.

The attention mechanisms live in :mod:`attnbench.attention` (pure PyTorch). The OpenMMLab
adapters, models and data code import them, never the other way round, so ``import attnbench``
does not import OpenMMLab.
"""
import re
import warnings

from . import _moved

#: What the pinned stack warns of on every use and no user of attnbench can act on, silenced here, before any entry
#: point imports the stack: mmengine 0.10.7 and mmcv 2.1.0 import the deprecated pkg_resources (tools/setup.sh pins a
#: setuptools that has it); mmseg's heads call its own deprecated ``build_loss``; mmseg's published configs, and ours
#: after them, keep ``pretrained`` and the cross-entropy's default ``avg_non_ignore=False``.
STACK_WARNINGS = ("pkg_resources is deprecated", "``build_loss`` would be deprecated soon",
                  "Default ``avg_non_ignore`` is False", "DeprecationWarning: pretrained is a deprecated")


def silence_stack_warnings() -> None:
    """Ignore :data:`STACK_WARNINGS` from here on (in the current ``warnings.catch_warnings`` context)."""
    for message in STACK_WARNINGS:
        warnings.filterwarnings("ignore", message=re.escape(message), category=UserWarning)


silence_stack_warnings()
_moved.install()

__version__ = "0.1.0"
