"""Survey category attention: OCR object-contextual representations, checked on values
against the paper's equations and mmseg's ``OCRHead``, and inside an mmseg ``CascadeEncoderDecoder``."""
import pytest
import torch
from mmengine.structures import PixelData
from mmseg.models.decode_heads.ocr_head import ObjectAttentionBlock, SpatialGatherModule
from mmseg.models.decode_heads.ocr_head import OCRHead as MMSegOCRHead
from mmseg.registry import MODELS as MMSEG_MODELS
from mmseg.structures import SegDataSample
from mmseg.utils import register_all_modules

import attnbench.mm.heads  # noqa: F401  (registers attnbench.OCRHead)
from attnbench.attention.object_context import ObjectContext
from attnbench.flops import count_macs
from attnbench.mm.heads import OCRHead
from reference import params64, randomize

BN = dict(type="BN", requires_grad=True)


@pytest.fixture(autouse=True)
def _mmseg_scope():
    """mmseg heads build their losses in the current default scope: mmseg's here, whatever scope
    earlier tests left."""
    from mmengine.registry import DefaultScope

    with DefaultScope.overwrite_default_scope("mmseg"):
        yield


def randomize_all(m):
    """Random parameters and batch-norm statistics, so the eval-mode norms are not identities."""
    randomize(m)
    with torch.no_grad():
        for bn in (b for b in m.modules() if isinstance(b, torch.nn.modules.batchnorm._BatchNorm)):
            bn.running_mean.normal_(std=0.5)
            bn.running_var.uniform_(0.5, 2.0)
    return m


def ocr_reference(m, feats, regions):
    """Eq. 1-4 in float64, eval-mode batch norms, one einsum per product."""
    p, x, r = params64(m), feats.to(torch.float64), regions.to(torch.float64)
    n, c, h, w = x.shape
    x, r = x.reshape(n, c, h * w), r.reshape(n, r.shape[1], h * w)  # (N, C, L), (N, K, L)

    def unit(name, v):  # 1x1 conv -> eval BN -> ReLU on (N, C_in, P)
        y = torch.einsum("oc,ncp->nop", p[name + ".conv.weight"][:, :, 0, 0], v)
        mean, var = p[name + ".bn.running_mean"], p[name + ".bn.running_var"]
        y = (y - mean[:, None]) / torch.sqrt(var[:, None] + 1e-5) * p[name + ".bn.weight"][:, None]
        return torch.relu(y + p[name + ".bn.bias"][:, None])

    m_soft = torch.softmax(m.scale * r, dim=2)  # normalised over the pixels i
    f = torch.einsum("nki,nci->nck", m_soft, x)  # Eq. 1: f_k = sum_i m_ki x_i
    phi = unit("query_project.1", unit("query_project.0", x))  # (N, C', L)
    psi = unit("key_project.1", unit("key_project.0", f))  # (N, C', K)
    kappa = torch.einsum("nci,nck->nik", phi, psi) / m.channels ** 0.5
    w_ik = torch.softmax(kappa, dim=2)  # Eq. 2, over the regions k
    y = unit("out_project", torch.einsum("nik,nck->nci", w_ik, unit("value_project", f)))  # Eq. 3
    z = unit("bottleneck", torch.cat([y, x], 1))  # Eq. 4
    return z.reshape(n, c, h, w)


def make(in_channels=16, channels=8, **kwargs):
    return randomize_all(ObjectContext(in_channels, channels, **kwargs)).eval()


@pytest.mark.parametrize("scale", [1.0, 2.5])
@pytest.mark.parametrize("shape,k", [((2, 16, 5, 7), 3), ((1, 16, 1, 3), 4), ((2, 16, 1, 1), 1)])
def test_object_context_matches_the_equations(shape, k, scale):
    m = make(scale=scale)
    feats, regions = torch.randn(shape), 2 * torch.randn(shape[0], k, *shape[2:])
    expected = ocr_reference(m, feats, regions)
    torch.testing.assert_close(m.double()(feats.double(), regions.double()), expected, rtol=1e-10, atol=1e-10)


def test_object_context_matches_mmseg_blocks_in_training_mode():
    """Batch statistics too: the key and value norms run over the N x K region vectors."""
    m = randomize_all(ObjectContext(16, 8))
    gather = SpatialGatherModule(1)
    block = ObjectAttentionBlock(16, 8, 1, conv_cfg=None, norm_cfg=BN, act_cfg=dict(type="ReLU"))
    block.load_state_dict(m.state_dict())
    feats, regions = torch.randn(2, 16, 6, 5), torch.randn(2, 3, 6, 5)
    torch.testing.assert_close(m(feats, regions), block(feats, gather(feats, regions)), rtol=1e-5, atol=1e-5)
    theirs = block.state_dict()  # and the running statistics move alike
    for name, value in m.state_dict().items():
        torch.testing.assert_close(value, theirs[name], rtol=1e-5, atol=1e-5)


def head_pair(norm_cfg=BN, **kwargs):
    args = dict(in_channels=24, channels=16, ocr_channels=8, num_classes=5, norm_cfg=norm_cfg) | kwargs
    ref = randomize_all(MMSegOCRHead(**args))
    ours = OCRHead(**args)
    ours.load_state_dict(ref.state_dict())  # strict
    return ours.eval(), ref.eval()


@pytest.mark.parametrize("shape,k", [((2, 24, 9, 7), 5), ((1, 24, 1, 1), 19)])
def test_ocr_head_matches_mmseg(shape, k):
    ours, ref = head_pair()
    feats, regions = torch.randn(shape), torch.randn(shape[0], k, *shape[2:])
    torch.testing.assert_close(ours([feats], regions), ref([feats], regions), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("norm_cfg", [BN, None])
def test_ocr_head_state_dicts_load_both_ways(norm_cfg):
    ours, ref = head_pair(norm_cfg)
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert not hasattr(ours, "spatial_gather_module")
    back = MMSegOCRHead(in_channels=24, channels=16, ocr_channels=8, num_classes=5, norm_cfg=norm_cfg).eval()
    back.load_state_dict(ours.state_dict())  # strict
    feats, regions = torch.randn(2, 24, 4, 6), torch.randn(2, 5, 4, 6)
    torch.testing.assert_close(back([feats], regions), ref([feats], regions), rtol=1e-5, atol=1e-5)


def test_ocr_head_counts_its_object_context():
    ours, _ = head_pair()
    (found,) = [m for m in ours.modules() if isinstance(m, ObjectContext)]
    assert found is ours.object_context_block and (found.in_channels, found.channels) == (16, 8)


def test_gradcheck():
    m = randomize_all(ObjectContext(4, 2, scale=1.5)).double()  # training mode: batch statistics
    feats = torch.randn(2, 4, 3, 2, dtype=torch.float64, requires_grad=True)
    regions = torch.randn(2, 3, 3, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(m, (feats, regions))


@pytest.mark.parametrize("shape,k", [((2, 64, 12, 10), 19), ((1, 32, 7, 9), 3)])
def test_macs_match_the_counter(shape, k):
    m = ObjectContext(shape[1]).eval()
    feats, regions = torch.randn(shape), torch.randn(shape[0], k, *shape[2:])
    measured = count_macs(m, feats, regions)
    assert measured > 0
    assert abs(m.macs(feats, regions) - measured) <= 0.02 * measured, (m.macs(feats, regions), measured)


@pytest.mark.parametrize("feats_shape,regions_shape,message", [
    ((2, 15, 4, 4), (2, 3, 4, 4), r"expected feats \(N, 16, H, W\), got \(2, 15, 4, 4\)"),
    ((16, 4, 4), (2, 3, 4, 4), r"expected feats \(N, 16, H, W\), got \(16, 4, 4\)"),
    ((2, 16, 4, 4), (2, 3, 4, 5),
     r"expected regions \(N, K, H, W\) = \(2, K, 4, 4\) with K >= 1, got \(2, 3, 4, 5\)"),
    ((2, 16, 4, 4), (1, 3, 4, 4), r"= \(2, K, 4, 4\) with K >= 1, got \(1, 3, 4, 4\)"),
    ((2, 16, 4, 4), (2, 0, 4, 4), r"= \(2, K, 4, 4\) with K >= 1, got \(2, 0, 4, 4\)"),
    ((2, 16, 4, 4), (2, 3, 16), r"= \(2, K, 4, 4\) with K >= 1, got \(2, 3, 16\)"),
])
def test_bad_input_shapes_are_rejected(feats_shape, regions_shape, message):
    with pytest.raises(ValueError, match=message):
        ObjectContext(16)(torch.randn(feats_shape), torch.randn(regions_shape))


@pytest.mark.parametrize("build,message", [
    (lambda: ObjectContext(0), "in_channels must be >= 1, got 0"),
    (lambda: ObjectContext(16, channels=0), "channels must be >= 1, got 0"),
    (lambda: ObjectContext(16, scale=0), "scale must be > 0, got 0"),
    (lambda: OCRHead(8, in_channels=16, channels=16, num_classes=3, norm_cfg=dict(type="GN", num_groups=2)),
     r"needs a batch norm \(BN, SyncBN\) or None as norm_cfg, got \{'type': 'GN'"),
    (lambda: OCRHead(8, in_channels=16, channels=16, num_classes=3, conv_cfg=dict(type="Conv2d")),
     "conv_cfg must be None, got"),
])
def test_bad_arguments_are_rejected(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_default_channels_halve_and_clamp():
    assert ObjectContext(512).channels == 256 and ObjectContext(1).channels == 1


def test_cascade_encoder_decoder_trains_with_registry_types():
    register_all_modules()
    norm_cfg = dict(type="BN", requires_grad=True)
    model = MMSEG_MODELS.build(dict(
        type="CascadeEncoderDecoder", num_stages=2,
        backbone=dict(type="ResNetV1c", depth=50, stem_channels=16, base_channels=8, num_stages=4,
                      out_indices=(0, 1, 2, 3), dilations=(1, 1, 2, 4), strides=(1, 2, 1, 1),
                      norm_cfg=norm_cfg, contract_dilation=True),
        decode_head=[
            dict(type="FCNHead", in_channels=128, in_index=2, channels=32, num_convs=1, concat_input=False,
                 dropout_ratio=0.1, num_classes=3, norm_cfg=norm_cfg,
                 loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=0.4)),
            dict(type="attnbench.OCRHead", in_channels=256, in_index=3, channels=64, ocr_channels=32,
                 dropout_ratio=0.1, num_classes=3, norm_cfg=norm_cfg,
                 loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0)),
        ],
        train_cfg=dict(), test_cfg=dict(mode="whole")))
    assert isinstance(model.decode_head[1], OCRHead)
    samples = []
    for _ in range(2):
        sample = SegDataSample(metainfo=dict(img_shape=(64, 64), ori_shape=(64, 64), pad_shape=(64, 64)))
        sample.gt_sem_seg = PixelData(data=torch.randint(0, 3, (1, 64, 64)))
        samples.append(sample)
    losses = model.loss(torch.randn(2, 3, 64, 64), samples)
    assert {"decode_0.loss_ce", "decode_1.loss_ce"} <= set(losses)
    assert all(torch.isfinite(v).all() for v in losses.values())
    losses["decode_1.loss_ce"].backward()
    assert model.decode_head[1].object_context_block.query_project[0].conv.weight.grad.abs().sum() > 0
