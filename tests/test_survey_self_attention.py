"""Survey self-attention family: DANet dual attention, APNB, IAUnet's IAU, CCNet's criss-cross
attention, on values."""
import pytest
import torch
from mmseg.models.decode_heads.ann_head import APNB
from mmseg.models.decode_heads.da_head import CAM, PAM

from attnbench.attention.asymmetric_non_local import AsymmetricNonLocal2d
from attnbench.attention.criss_cross import CrissCrossAttention
from attnbench.attention.dual_attention import DualAttention
from attnbench.attention.interaction_aggregation import InteractionAggregation2d
from attnbench.flops import count_macs
from reference import fc, params64, randomize

CLASSES = [DualAttention, AsymmetricNonLocal2d, InteractionAggregation2d, CrissCrossAttention]
IAU_MODES = ["channel", "spatial", "both"]


def make(cls, channels=16, train=True, **kwargs):
    """A randomised module; in eval mode its BNs get random running statistics too."""
    m = randomize(cls(channels, **kwargs)).train(train)
    with torch.no_grad():
        for bn in (b for b in m.modules() if isinstance(b, torch.nn.BatchNorm2d)):
            bn.running_mean.normal_()
            bn.running_var.uniform_(0.5, 2.0)
    return m


def conv(p, name, t):
    """1x1 conv on a (N, C, ...) tensor."""
    y = torch.einsum("oc,nc...->no...", p[name + ".weight"][:, :, 0, 0], t)
    bias = p.get(name + ".bias")
    return y if bias is None else y + bias.view(1, -1, *[1] * (t.dim() - 2))


def batch_norm(p, name, t, dims, train):
    """BN of a (N, C, ...) tensor: batch statistics over ``dims`` (biased variance) in training,
    running statistics otherwise."""
    shape = (1, -1, *[1] * (t.dim() - 2))
    if train:
        mean, var = t.mean(dims, keepdim=True), t.var(dims, unbiased=False, keepdim=True)
    else:
        mean, var = p[name + ".running_mean"].view(shape), p[name + ".running_var"].view(shape)
    weight, bias = p[name + ".weight"].view(shape), p[name + ".bias"].view(shape)
    return (t - mean) / torch.sqrt(var + 1e-5) * weight + bias


def dual_reference(m, x):
    """Eq. 1-4 of DANet: each query pixel's softmax over all pixels, then the channel attention
    with the official ``max - energy`` logits, summed on x."""
    p, x = params64(m), x.to(torch.float64)
    n, c, h, w = x.shape
    flat = x.reshape(n, c, h * w)
    q, k, v = (conv(p, name, flat) for name in ("query", "key", "value"))
    position = torch.zeros_like(flat)
    for i in range(h * w):
        s = torch.einsum("no,noj->nj", q[:, :, i], k).softmax(-1)  # (N, HW), row i of S
        position[:, :, i] = torch.einsum("nj,ncj->nc", s, v)
    energy = torch.einsum("nil,njl->nij", flat, flat)
    attention = (energy.amax(-1, keepdim=True) - energy).softmax(-1)
    channel = torch.einsum("nij,njl->nil", attention, flat)
    return x + (p["gamma_position"] * position + p["gamma_channel"] * channel).view(n, c, h, w)


def adaptive_avg_pool(t, s):
    """(N, C, H, W) -> (N, C, s*s): mean over bins [floor(a H / s), ceil((a + 1) H / s))."""
    h, w = t.shape[2:]
    bins = []
    for a in range(s):
        for b in range(s):
            y0, y1 = a * h // s, ((a + 1) * h + s - 1) // s
            x0, x1 = b * w // s, ((b + 1) * w + s - 1) // s
            bins.append(t[:, :, y0:y1, x0:x1].mean((2, 3)))
    return torch.stack(bins, 2)


def apnb_reference(m, x):
    """x + W_o softmax(q k^T / sqrt(C')) v with q = ReLU(BN(W_phi x)) at every pixel, keys the
    pyramid samples of q, values the pyramid samples of W_v x."""
    p, x = params64(m), x.to(torch.float64)
    n, c, h, w = x.shape
    q = torch.relu(batch_norm(p, "query_key.1", conv(p, "query_key.0", x), (0, 2, 3), m.training))
    k = torch.cat([adaptive_avg_pool(q, s) for s in m.pool_sizes], 2)  # (N, C', S)
    v = torch.cat([adaptive_avg_pool(conv(p, "value", x), s) for s in m.pool_sizes], 2)
    logits = torch.einsum("nci,ncj->nij", q.reshape(n, -1, h * w), k) / m.key_channels ** 0.5
    a = torch.einsum("nij,ncj->nci", logits.softmax(-1), v).reshape(n, -1, h, w)
    return x + conv(p, "out_conv", a)


def iau_reference(m, x):
    """Channel IAU, then spatial IAU over the part and global nodes, one part pair at a time."""
    p, x = params64(m), x.to(torch.float64)
    n, c, h, w = x.shape
    train = m.training
    if m.mode in ("channel", "both"):
        flat = x.reshape(n, c, h * w)
        gram = torch.einsum("nil,njl->nij", flat, flat)
        aggregated = torch.einsum("nij,njl->nil", gram.softmax(-1), flat).reshape(n, c, h, w)
        x = x + batch_norm(p, "channel_update.1", conv(p, "channel_update.0", aggregated), (0, 2, 3), train)
    if m.mode in ("spatial", "both"):
        maps = torch.sigmoid(batch_norm(p, "part_maps.1", conv(p, "part_maps.0", x), (0, 2, 3), train))
        parts = [fc(p, "embed", (maps[:, i:i + 1] * x).sum((2, 3))) for i in range(m.num_parts)]  # (N, C')
        u = fc(p, "embed", x.mean((2, 3)))
        relation = torch.stack([torch.stack([fc(p, "relation.0", torch.cat([(pi - pj).abs(), u], 1))[:, 0]
                                             for pj in parts], 1) for pi in parts], 1)  # (N, P_i, P_j)
        relation = batch_norm(p, "relation.1", relation[:, None], (0, 2, 3), train)[:, 0]
        updated = []
        for i, pi in enumerate(parts):
            others = [j for j in range(m.num_parts) if j != i]
            weights = relation[:, i, others].softmax(-1)  # (N, P - 1)
            neighbour = sum(weights[:, k, None] * parts[j] for k, j in enumerate(others))
            updated.append(fc(p, "aggregate.0", torch.cat([pi, neighbour], 1)))
        updated = torch.stack(updated, 2)  # (N, C', P)
        updated = torch.relu(batch_norm(p, "aggregate.1", updated, (0, 2), train))
        summary = torch.cat([updated.mean(2), u], 1)  # (N, 2C')
        update = batch_norm(p, "spatial_update.1", fc(p, "spatial_update.0", summary), (0,), train)  # (N, C)
        x = x + update[:, :, None, None]
    return x


def criss_cross_reference(m, x):
    """Eq. 1-2 of CCNet, pixel by pixel: softmax over the pixel's column and row (itself once),
    the weighted values added with gamma, ``recurrence`` times with the same weights."""
    p, x = params64(m), x.to(torch.float64)
    n, c, h, w = x.shape
    for _ in range(m.recurrence):
        q, k, v = (conv(p, name + "_conv", x) for name in ("query", "key", "value"))
        out = torch.zeros_like(x)
        for i in range(h):
            for j in range(w):
                keys = [(u, j) for u in range(h)] + [(i, u) for u in range(w) if u != j]
                rows, columns = zip(*keys)
                logits = torch.einsum("nc,nck->nk", q[:, :, i, j], k[:, :, rows, columns])
                out[:, :, i, j] = torch.einsum("nk,nck->nc", logits.softmax(-1), v[:, :, rows, columns])
        x = x + p["gamma"] * out
    return x


def copy_to_mmseg_pam_cam(m):
    pam, cam = PAM(m.in_channels, m.key_channels), CAM()
    names = {"query": "query_project", "key": "key_project", "value": "value_project"}
    state = m.state_dict()
    pam.load_state_dict({names[k.split(".")[0]] + "." + k.split(".")[1]: v for k, v in state.items()
                         if not k.startswith("gamma")} | {"gamma.scale": state["gamma_position"]})
    cam.load_state_dict({"gamma.scale": state["gamma_channel"]})
    return pam, cam


def copy_to_mmseg_apnb(m):
    """mmseg's APNB with our attention branch (its bottleneck conv-BN-ReLU keeps its own init)."""
    ref = APNB(m.in_channels, m.key_channels, m.in_channels, query_scales=(1,), key_pool_scales=m.pool_sizes,
               conv_cfg=None, norm_cfg=dict(type="BN"), act_cfg=dict(type="ReLU"))
    names = {"query_key.0": ["key_project.conv", "query_project.conv"],  # one shared ConvModule
             "query_key.1": ["key_project.bn", "query_project.bn"],
             "value": ["value_project"], "out_conv": ["out_project"]}
    state = ref.state_dict()
    for key, value in m.state_dict().items():
        module, tensor = key.rsplit(".", 1)
        for name in names[module]:
            state[f"stages.0.{name}.{tensor}"] = value
    ref.load_state_dict(state)
    return ref.train(m.training)


@pytest.mark.parametrize("shape", [(2, 16, 5, 7), (1, 16, 1, 3), (2, 16, 4, 4)])
def test_dual_attention_matches_the_equations(shape):
    m = make(DualAttention)
    x = torch.randn(shape)
    torch.testing.assert_close(m.double()(x.double()), dual_reference(m, x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("branch", ["position", "channel", "both"])
@pytest.mark.parametrize("shape", [(2, 16, 5, 7), (1, 16, 3, 1)])
def test_dual_attention_matches_mmseg_pam_and_cam(branch, shape):
    m = make(DualAttention, reduction=4)
    with torch.no_grad():  # a zero gamma switches a branch off
        if branch == "position":
            m.gamma_channel.zero_()
        if branch == "channel":
            m.gamma_position.zero_()
    pam, cam = copy_to_mmseg_pam_cam(m)
    x = torch.randn(shape)
    expected = {"position": pam, "channel": cam, "both": lambda t: pam(t) + cam(t) - t}[branch]
    torch.testing.assert_close(m(x), expected(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("shape", [(2, 16, 5, 7), (1, 16, 12, 11), (2, 16, 1, 3)])  # HW <= S and HW > S
def test_asymmetric_non_local_matches_the_equations(train, shape):
    if train and shape[0] * shape[2] * shape[3] == 1:
        pytest.skip("BN needs more than one value per channel in training")
    m = make(AsymmetricNonLocal2d, train=train)
    x = torch.randn(shape)
    torch.testing.assert_close(m.double()(x.double()), apnb_reference(m, x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("shape", [(2, 16, 5, 7), (2, 16, 13, 9)])
def test_asymmetric_non_local_matches_mmseg_apnb(train, shape):
    m = make(AsymmetricNonLocal2d, train=train, pool_sizes=(1, 2, 3, 6))
    ref = copy_to_mmseg_apnb(m)
    x = torch.randn(shape)
    context = m(x) - x
    torch.testing.assert_close(context, ref.stages[0](x, x), rtol=1e-5, atol=1e-5)
    # mmseg's APNB is that attention branch fused with x by concatenation and a conv-BN-ReLU
    torch.testing.assert_close(ref.bottleneck(torch.cat([context, x], 1)), ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", IAU_MODES)
@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("shape", [(2, 16, 5, 7), (3, 16, 1, 3)])
def test_interaction_aggregation_matches_the_equations(mode, train, shape):
    m = make(InteractionAggregation2d, train=train, mode=mode, num_parts=3)
    x = torch.randn(shape)
    torch.testing.assert_close(m.double()(x.double()), iau_reference(m, x), rtol=1e-10, atol=1e-10)


def test_interaction_aggregation_is_the_channel_then_the_spatial_step():
    both = make(InteractionAggregation2d, mode="both")
    channel = InteractionAggregation2d(16, mode="channel")
    spatial = InteractionAggregation2d(16, mode="spatial")
    state = both.state_dict()
    channel.load_state_dict({k: v for k, v in state.items() if k.startswith("channel_update")})
    spatial.load_state_dict({k: v for k, v in state.items() if not k.startswith("channel_update")})
    x = torch.randn(2, 16, 5, 6)
    torch.testing.assert_close(both(x), spatial(channel(x)), rtol=0, atol=0)


@pytest.mark.parametrize("recurrence", [1, 2, 3])
@pytest.mark.parametrize("shape", [(2, 16, 5, 7), (1, 16, 1, 3), (2, 16, 4, 1)])
def test_criss_cross_attention_matches_the_equations(recurrence, shape):
    m = make(CrissCrossAttention, reduction=4, recurrence=recurrence)
    x = torch.randn(shape)
    torch.testing.assert_close(m.double()(x.double()), criss_cross_reference(m, x), rtol=1e-10, atol=1e-10)


def test_criss_cross_attention_matches_mmcv():
    """One pass is mmcv's CrissCrossAttention on the same weights (``gamma`` is mmcv's ``Scale``)."""
    from mmcv.ops import CrissCrossAttention as MMCVCrissCross

    m = make(CrissCrossAttention, recurrence=1)
    ref = MMCVCrissCross(16)
    state = {k: v for k, v in m.state_dict().items() if k != "gamma"}
    ref.load_state_dict({**state, "gamma.scale": m.gamma.detach().clone()})
    x = torch.randn(2, 16, 6, 9)
    torch.testing.assert_close(m(x), ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls,kwargs", [(DualAttention, {}), (AsymmetricNonLocal2d, dict(pool_sizes=(1, 2))),
                                        *[(InteractionAggregation2d, dict(mode=mode)) for mode in IAU_MODES],
                                        (CrissCrossAttention, {})])
def test_gradcheck(cls, kwargs):
    m = make(cls, channels=6, **kwargs).double()
    x = torch.randn(2, 6, 3, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(m, (x,))


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("channels", [16, 2048])
def test_defaults_build_for_benchmark_widths(cls, channels):
    m = cls(channels)
    assert m(torch.randn(2, channels, 1, 2)).shape == (2, channels, 1, 2)


@pytest.mark.parametrize("cls,width", [(DualAttention, "key_channels"), (AsymmetricNonLocal2d, "key_channels"),
                                       (InteractionAggregation2d, "node_channels"),
                                       (CrissCrossAttention, "key_channels")])
def test_reductions_clamp_to_one_channel(cls, width):
    m = make(cls, reduction=32)
    assert getattr(m, width) == 1
    x = torch.randn(2, 16, 3, 5)
    assert m(x).shape == x.shape and torch.isfinite(m(x)).all()


@pytest.mark.parametrize("cls,kwargs", [(DualAttention, {}), (AsymmetricNonLocal2d, {}),
                                        *[(InteractionAggregation2d, dict(mode=mode)) for mode in IAU_MODES],
                                        (CrissCrossAttention, {})])
@pytest.mark.parametrize("shape", [(2, 64, 12, 10), (3, 32, 7, 9)])
def test_macs_match_the_counter(cls, kwargs, shape):
    m = cls(shape[1], **kwargs)
    x = torch.randn(shape)
    measured = count_macs(m, x)
    assert measured > 0
    assert abs(m.macs(x) - measured) <= 0.02 * measured, (m.macs(x), measured)


@pytest.mark.parametrize("build,message", [
    (lambda: DualAttention(0), "in_channels must be >= 1, got 0"),
    (lambda: DualAttention(16, reduction=0), "reduction must be >= 1, got 0"),
    (lambda: AsymmetricNonLocal2d(0), "in_channels must be >= 1, got 0"),
    (lambda: AsymmetricNonLocal2d(16, reduction=-1), "reduction must be >= 1, got -1"),
    (lambda: AsymmetricNonLocal2d(16, pool_sizes=()), r"pool_sizes must be a non-empty sequence of positive "
                                                      r"integers, got \(\)"),
    (lambda: AsymmetricNonLocal2d(16, pool_sizes=(1, 0)), r"pool_sizes .* got \(1, 0\)"),
    (lambda: AsymmetricNonLocal2d(16, pool_sizes=(1, 2.5)), r"pool_sizes .* got \(1, 2.5\)"),
    (lambda: InteractionAggregation2d(0), "in_channels must be >= 1, got 0"),
    (lambda: InteractionAggregation2d(16, mode="temporal"),
     r"mode must be one of \('spatial', 'channel', 'both'\), got 'temporal'"),
    (lambda: InteractionAggregation2d(16, reduction=0), "reduction must be >= 1, got 0"),
    (lambda: InteractionAggregation2d(16, num_parts=1), "num_parts must be >= 2, got 1"),
    (lambda: CrissCrossAttention(0), "in_channels must be >= 1, got 0"),
    (lambda: CrissCrossAttention(16, reduction=0), "reduction must be >= 1, got 0"),
    (lambda: CrissCrossAttention(16, recurrence=0), "recurrence must be >= 1, got 0"),
])
def test_bad_arguments_are_rejected(build, message):
    with pytest.raises(ValueError, match=message):
        build()
