import subprocess
import sys


def test_core_does_not_import_openmmlab():
    code = ("import sys, attnbench, attnbench.attention, attnbench.flops; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'mmcv', 'mmdet', 'mmseg', 'mmengine'}); "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_openmmlab_stack_with_compiled_ops_imports():
    import mmcv.ops
    import mmdet
    import mmseg
    import torch

    assert (mmcv.__version__, mmdet.__version__, mmseg.__version__) == ("2.1.0", "3.3.0", "1.2.2")
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 10.0, 10.0], [20.0, 20.0, 30.0, 30.0]])
    kept, _ = mmcv.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
    assert kept.shape[0] == 2
