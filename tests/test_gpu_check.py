"""tools/gpu_check.sh on a machine without a GPU: one line saying so, exit 0, nothing written."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is here: the script would run its benchmarks")
def test_gpu_check_without_a_gpu_says_so_and_writes_nothing(tmp_path):
    out = tmp_path / "gpu-results"
    done = subprocess.run(["bash", str(ROOT / "tools/gpu_check.sh")], cwd=ROOT, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "OUT": str(out)})
    assert done.returncode == 0, done.stderr
    assert "no CUDA GPU on this machine" in done.stdout and "nothing written" in done.stdout
    assert not out.exists()
