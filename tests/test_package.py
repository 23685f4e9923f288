import ast
import subprocess
import sys
from pathlib import Path

import pytest

import attnbench


def test_core_does_not_import_openmmlab():
    code = ("import sys, attnbench, attnbench.attention, attnbench.flops; "
            "[getattr(attnbench.attention, name) for name in attnbench.attention.__all__]; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'mmcv', 'mmdet', 'mmseg', 'mmengine'}); "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("code", [
    "import attnbench.variants, attnbench.analysis.report, attnbench.analysis.summary, attnbench.analysis.effects, "
    "attnbench.analysis.claims, attnbench.analysis.studies, attnbench.analysis.published",
    "import runpy; sys.argv = ['compare.py', '--help']\ntry: runpy.run_path('tools/compare.py', run_name='__main__')\n"
    "except SystemExit: pass",
])
def test_the_vocabulary_and_the_reports_import_no_torch(code):
    """The catalogue, grammar and reporting tools load in a fraction of a second: torch and OpenMMLab stay out."""
    check = "\nheavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'mmcv', 'mmengine', 'mmdet', 'mmseg'})"
    done = subprocess.run([sys.executable, "-c", f"import sys\n{code}{check}\nassert not heavy, heavy"],
                          cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-1000:]


def test_a_mechanism_class_is_resolved_on_first_use():
    from attnbench.attention.generalized_attention import GeneralizedAttention
    from attnbench.variants import GENERALIZED_ATTENTION, MECHANISMS

    assert GENERALIZED_ATTENTION.module is GeneralizedAttention
    assert MECHANISMS["deformable"].registered_name == "DCN" and MECHANISMS["se"].registered_name == "SqueezeExcite"
    assert MECHANISMS["se"].sequence_module is None and MECHANISMS["dynamic"].sequence_module.__name__ == "DynamicConv1d"


def test_openmmlab_stack_with_compiled_ops_imports():
    import mmcv.ops
    import mmdet
    import mmseg
    import torch

    assert (mmcv.__version__, mmdet.__version__, mmseg.__version__) == ("2.1.0", "3.3.0", "1.2.2")
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 10.0, 10.0], [20.0, 20.0, 30.0, 30.0]])
    kept, _ = mmcv.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
    assert kept.shape[0] == 2


def test_importing_attnbench_silences_the_stacks_warnings_and_no_others():
    """mmengine's ``is_installed`` (Config.fromfile calls it for a base config ``mmdet::...``) imports pkg_resources;
    mmseg's loss builder, cross-entropy and ResNet warn of their own defaults: after ``import attnbench``, as in
    every tool, none of them prints, and a warning of another kind still does."""
    code = ("import warnings, attnbench\n"
            "from mmengine.utils import is_installed; assert is_installed('mmdet')\n"
            "from mmseg.models.builder import build_loss; build_loss(dict(type='CrossEntropyLoss'))\n"
            "from mmseg.models.backbones import ResNetV1c; ResNetV1c(depth=18, pretrained='weights.pth')\n"
            "warnings.warn('a warning of another kind')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    warned = [line for line in done.stderr.splitlines() if "Warning: " in line]
    assert len(warned) == 1 and warned[0].endswith("UserWarning: a warning of another kind"), done.stderr[-2000:]


def test_every_export_is_itself_whatever_was_imported_before():
    """Each name of ``attnbench.attention.__all__`` is the function or class its file defines, also after every
    file of the package was imported (a file named as the function it defines would otherwise take its place)."""
    code = ("import importlib, pkgutil, types, attnbench.attention as package\n"
            "for info in pkgutil.iter_modules(package.__path__): importlib.import_module(f'attnbench.attention.{info.name}')\n"
            "import attnbench.attention.area_attention\n"
            "from attnbench.attention import area_attention, separable_bias_attention\n"
            "assert callable(area_attention) and not isinstance(area_attention, types.ModuleType), area_attention\n"
            "modules = [name for name in package.__all__ if isinstance(getattr(package, name), types.ModuleType)]\n"
            "assert not modules, modules\n"
            "defined = {name: getattr(package, name).__module__ for name in package.__all__\n"
            "           if callable(getattr(package, name))}\n"
            "assert all(module == f'attnbench.attention.{package._SOURCES[name]}' for name, module in defined.items())\n"
            "from attnbench.attention.area_attention import Areas, count_areas  # the files' own paths still work")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_no_run_debris_is_committed():
    """Stores keep their rows, plots and tables: what a run wrote (configs, logs, submitit's folders) stays in
    the ignored ``runs/`` and ``submitit/`` folders, at any depth under results/."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files", "results"], cwd=root, capture_output=True, text=True, check=True)
    debris = [path for path in tracked.stdout.splitlines() if {"runs", "submitit"} & set(path.split("/")[:-1])]
    assert not debris, debris[:5]
    ignored = subprocess.run(["git", "check-ignore", "results/a/b/runs/x.log", "results/a/b/submitit/x.out"],
                             cwd=root, capture_output=True, text=True)
    assert len(ignored.stdout.splitlines()) == 2


#: The package's floors, lowest first: a module imports its own floor and those below, never one above.
FLOORS = {"attention": 0, "variants": 1, "flops": 1, "config_files": 1, "data": 1, "models": 1, "mm": 2, "sweep": 3,
          "analysis": 4, "commands": 5}


def _floor(module: str) -> int | None:
    parts = module.split(".")
    return FLOORS.get(parts[1]) if parts[0] == "attnbench" and len(parts) > 1 else None


def upward_imports(package: Path) -> list[str]:
    """Each ``module -> imported`` of ``package``'s files (attnbench's layout) that points up a floor."""
    found = []
    for path in sorted(package.rglob("*.py")):
        name = ".".join(path.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        own, here = _floor(name), name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(here.split(".")[:len(here.split(".")) + 1 - node.level]) if node.level else ""
                module = ".".join(filter(None, (base, node.module)))
                imported = [f"{module}.{alias.name}" for alias in node.names] if module == "attnbench" else [module]
            else:
                continue
            found += [f"{name} -> {target}" for target in imported
                      if own is not None and (_floor(target) or 0) > own]
    return found


def test_no_import_points_up_a_floor(tmp_path):
    """attention < variants, flops, data, models < mm (OpenMMLab adapters) < sweep (plan, launch, run, store)
    < analysis < commands; and the check itself finds an import that points up."""
    package = Path(attnbench.__file__).parent
    assert upward_imports(package) == []
    fake = tmp_path / "attnbench"
    (fake / "mm").mkdir(parents=True)
    (fake / "mm" / "hooks.py").write_text("from ..analysis import stats\nfrom attnbench.sweep.store import X\n")
    assert upward_imports(fake) == ["attnbench.mm.hooks -> attnbench.analysis", "attnbench.mm.hooks -> attnbench.sweep.store"]


def test_a_moved_module_still_imports_from_its_old_path_and_warns():
    code = ("import warnings\nwarnings.simplefilter('error', DeprecationWarning)\nimport attnbench.analysis.stats as new\n"
            "try:\n    import attnbench.sweep.stats\nexcept DeprecationWarning as warning:\n    print(warning)\n"
            "warnings.simplefilter('ignore', DeprecationWarning)\nimport attnbench.sweep.stats as old\n"
            "from attnbench.sweep.summary import comparison_table\nassert old is new, old")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "attnbench.sweep.stats moved to attnbench.analysis.stats; the old path goes in attnbench 0.2"
