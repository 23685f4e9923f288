"""Every mechanism on a GPU and under autocast, against its own float64 CPU forward and backward.

The rest of the suite checks each mechanism against a float64 reference written from its
equation, on the CPU. Here the same modules run on CUDA on the paths they take there (the fused
generalized attention, the flash and memory-efficient kernels of ``scaled_dot_product_attention``,
torchvision's CUDA ``deform_conv2d``): in float32 (TF32 off) their output and every gradient must
match the float64 CPU module. Under fp16 and bf16 autocast, on the CPU and on CUDA, they must run
(autocast hands kernels operands of mixed dtypes), stay finite and stay close. The CUDA cases are
skipped on machines without a GPU.
"""
import copy

import pytest
import torch

from attnbench.attention import (
    ALL_FACTORS, BAM, CBAM, AreaAttention1d, AreaAttention2d, AsymmetricNonLocal2d, CrissCrossAttention, DeformConv1d,
    DeformConv2d, DoubleAttention, DualAttention, DynamicConv1d, DynamicConv2d, FrequencyChannelAttention, GatherExcite,
    GeneralizedAttention, GeneralizedAttention1d, GlobalContext, InteractionAggregation2d, LightweightConv1d,
    ModulatedDeformConv2d, NonLocal2d, ObjectContext, ResidualAttention, SelectiveKernelConv2d,
    SpatialChannelSqueezeExcite, SpatialPyramidAttention, SqueezeExcite,
)
from reference import padding, randomize

CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"))

C, MAP, SEQ, MEM = 32, (2, 32, 9, 13), (2, 11, 32), (2, 7, 32)


def feature_map():
    return (torch.randn(MAP),), {}


def sequence(mode):
    """Inputs of a 1D mechanism: self-attention with padding, causal, or over a padded memory."""
    x = torch.randn(SEQ)
    if mode == "causal":
        return (x,), dict(causal=True)
    if mode == "cross":
        return (x,), dict(memory=torch.randn(MEM), key_padding_mask=padding([7, 4], 7))
    return (x,), dict(key_padding_mask=padding([11, 6], 11))


def convolution_1d(mode):
    x = torch.randn(SEQ)
    return (x,), (dict(key_padding_mask=padding([11, 6], 11)) if mode == "padded" else {})


MAP_MODULES = {
    "deformable": lambda: DeformConv2d(C, C, 3, padding=1, deform_groups=2),
    "deformable_v2": lambda: ModulatedDeformConv2d(C, C, 3, stride=2, padding=1, deform_groups=2),
    "dynamic": lambda: DynamicConv2d(C, 3, num_heads=8),
    "area": lambda: AreaAttention2d(C, num_heads=4, max_area_width=3, max_area_height=2, kv_stride=2),
    "area_max_top_k": lambda: AreaAttention2d(C, num_heads=4, area_key_mode="max_concat", area_value_mode="max",
                                              top_k_areas=5),
    "se": lambda: SqueezeExcite(C, reduction=4),
    "cbam": lambda: CBAM(C, reduction=4),
    "gc": lambda: GlobalContext(C),
    "nonlocal": lambda: NonLocal2d(C),
    "nonlocal_dot": lambda: NonLocal2d(C, mode="dot_product"),
    "asymmetric_nonlocal": lambda: AsymmetricNonLocal2d(C),
    "bam": lambda: BAM(C, reduction=4, dilation=2),
    "double_attention": lambda: DoubleAttention(C),
    "dual_attention": lambda: DualAttention(C),
    "frequency": lambda: FrequencyChannelAttention(C, reduction=4, frequency_selection="top4"),
    "gather_excite": lambda: GatherExcite(C, extent=2, parametric=True),
    "interaction_aggregation": lambda: InteractionAggregation2d(C),
    "criss_cross": lambda: CrissCrossAttention(C, reduction=4),
    "residual_attention": lambda: ResidualAttention(C),
    "selective_kernel": lambda: SelectiveKernelConv2d(C, C, reduction=4, min_hidden=8),
    "scse": lambda: SpatialChannelSqueezeExcite(C),
    "spatial_pyramid": lambda: SpatialPyramidAttention(C, reduction=4),
}
CASES = {
    **{f"ga2d_{f}": (lambda f=f: GeneralizedAttention(C, num_heads=4, attention_type=f, position_magnitude=2),
                     feature_map) for f in ALL_FACTORS},
    **{f"ga2d_{f}_range3_qstride2": (lambda f=f: GeneralizedAttention(
        C, spatial_range=3, num_heads=4, attention_type=f, q_stride=2, kv_stride=1), feature_map)
       for f in ("1111", "0110", "0010")},
    **{f"ga2d_{f}_{implementation}": (lambda f=f, implementation=implementation: GeneralizedAttention(
        C, num_heads=4, attention_type=f, implementation=implementation), feature_map)
       for f in ("1111", "0110", "1000", "0001") for implementation in ("chunked", "fused")},
    **{f"ga2d_1110_{score}_hard{hard}": (lambda score=score, hard=hard: GeneralizedAttention(
        C, spatial_range=2, num_heads=4, attention_type="1110", score=score, hard=hard), feature_map)
       for score, hard in (("scaled_dot", 0), ("bilinear", 0), ("additive", 0), ("dot", 2))},
    **{f"ga2d_{f}_range2_fused": (lambda f=f: GeneralizedAttention(
        C, spatial_range=2, num_heads=4, attention_type=f, implementation="fused"), feature_map)
       for f in ("1111", "0010")},
    **{f"ga1d_{f}_{mode}": (lambda f=f: GeneralizedAttention1d(C, 4, f), lambda mode=mode: sequence(mode))
       for f in ALL_FACTORS for mode in ("self", "causal", "cross")},
    **{f"area1d_{mode}": (lambda: AreaAttention1d(C, 4, max_area_width=3, area_key_mode="concat"),
                          lambda mode=mode: sequence(mode)) for mode in ("self", "causal", "cross")},
    **{f"{cls.__name__}_{path}_{mode}": (
        lambda cls=cls, path=path, mode=mode: cls(C, 5, 4, causal=mode == "causal", path=path),
        lambda mode=mode: convolution_1d(mode))
       for cls in (DynamicConv1d, LightweightConv1d) for path in ("unfold", "band") for mode in ("causal", "padded")},
    **{f"deformable1d_{causal=}": (lambda causal=causal: DeformConv1d(C, C, 3, deform_groups=2, causal=causal),
                                   lambda: ((torch.randn(SEQ),), {})) for causal in (False, True)},
    **{name: (build, feature_map) for name, build in MAP_MODULES.items()},
    "object_context": (lambda: ObjectContext(C, 16), lambda: ((torch.randn(MAP), torch.randn(2, 5, *MAP[2:])), {})),
}


def build(name):
    """The float64 CPU module (random parameters, eval mode) and its float64 CPU inputs."""
    make_module, make_inputs = CASES[name]
    module = randomize(make_module()).double().eval()
    args, kwargs = make_inputs()
    args = tuple(a.double().requires_grad_() for a in args)
    kwargs = {k: to(v, torch.float64) for k, v in kwargs.items()}
    return module, args, kwargs


def to(value, dtype, device="cpu"):
    """A floating tensor in ``dtype`` on ``device``, another tensor on ``device``, anything else as is."""
    if not torch.is_tensor(value):
        return value
    return value.to(device, dtype) if value.is_floating_point() else value.to(device)


def forward_backward(module, args, kwargs, autocast_dtype=None):
    """Output and the gradients of <output, fixed random weights> w.r.t. the inputs and parameters."""
    device = next(module.parameters()).device.type
    with torch.autocast(device, dtype=autocast_dtype, enabled=autocast_dtype is not None):
        out = module(*args, **kwargs)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    (out.double() * weights.to(out.device)).sum().backward()
    grads = [a.grad for a in args] + [p.grad for p in module.parameters()]
    return [t.detach().double().cpu() for t in [out, *grads] if t is not None]


def moved(module, args, kwargs, device, dtype=torch.float32):
    """A copy of the module and inputs on ``device`` in ``dtype``."""
    module = copy.deepcopy(module).to(device, dtype)
    args = tuple(a.detach().to(device, dtype).requires_grad_() for a in args)
    kwargs = {k: to(v, dtype, device) for k, v in kwargs.items()}
    return module, args, kwargs


def relative_errors(got, expected):
    """||got - expected|| / ||expected|| per tensor; a tensor that is ~0 in exact arithmetic (the
    gradient of a bias that softmax cancels) is measured against 1e-2 of the largest norm instead."""
    assert len(got) == len(expected)
    floor = 1e-2 * max(e.norm() for e in expected)
    return [((g - e).norm() / torch.maximum(e.norm(), floor)).item() for g, e in zip(got, expected)]


@pytest.fixture(autouse=True)
def _no_tf32():
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


@pytest.mark.parametrize("device", [CUDA])
@pytest.mark.parametrize("name", CASES)
def test_float32_matches_float64_on_cpu(name, device):
    module, args, kwargs = build(name)
    expected = forward_backward(module, args, kwargs)
    errors = relative_errors(forward_backward(*moved(module, args, kwargs, device)), expected)
    assert errors[0] < 1e-4 and max(errors[1:]) < 1e-3, f"relative errors (output, then gradients): {errors}"


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("name", CASES)
def test_autocast_runs_finite_and_close(name, dtype, device):
    module, args, kwargs = build(name)
    expected = forward_backward(module, args, kwargs)
    got = forward_backward(*moved(module, args, kwargs, device), autocast_dtype=dtype)
    assert all(t.isfinite().all() for t in got)
    errors = relative_errors(got[:1], expected[:1])  # the output: gradients of ill-conditioned terms vary more
    assert errors[0] < (2e-2 if dtype == torch.float16 else 8e-2), f"output relative error {errors[0]:.3g}"
