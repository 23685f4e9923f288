"""The grammar's ``gate``: every mechanism whose branch starts at zero (a block that is the identity at
init) takes it, closed by default (only the gate learns at the first step), open at ``gate=1`` (every
weight does). Float64."""
import pytest
import torch

from attnbench.sweep.catalog import build_mechanism
from attnbench.variants import GENERALIZED_ATTENTION, MECHANISMS, VISION_TOKENS, Variant, mechanism_of

#: Tokens that take ``gate``, from the table; a factor string stands for the generalized attention.
GATED = ("1111", *(t for t in VISION_TOKENS if "gate" in MECHANISMS[t].params))
UNGATED = tuple(t for t in VISION_TOKENS if t not in GATED)
#: The layers a mechanism's ``out_gain`` initialises (those of ``gamma_init`` are its ``gamma*`` scalars).
OUT_LAYERS = {"gc": ("transform.3",), "nonlocal": ("out_conv",), "a2": ("out_conv",), "ann": ("out_conv",),
              "iau": ("channel_update.1", "spatial_update.1")}
#: Parameters that get no gradient even with the gate open, and why: a bias constant over what a softmax
#: normalises (a key's bias adds ``q_i . b`` to every logit of query i; the pooling logits' bias to
#: every position's), or a bias that the training-mode BatchNorm right after it subtracts again (IAU's
#: node embedding bias also cancels in ``|p_i - p_j|`` and is constant over the batch in ``u``).
NO_GRADIENT = {
    "area": {"key_conv.bias": "softmax"}, "gc": {"context_conv.bias": "softmax"}, "nonlocal": {"phi.bias": "softmax"},
    "da": {"key.bias": "softmax"}, "cc": {"key_conv.bias": "softmax"},
    "iau": {"relation.1.bias": "softmax", "channel_update.0.bias": "BN", "part_maps.0.bias": "BN",
            "embed.bias": "BN", "relation.0.bias": "BN", "aggregate.0.bias": "BN", "spatial_update.0.bias": "BN"},
}


def build(spec: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_mechanism(spec, 16).double().train()


def gate_names(token: str, module: torch.nn.Module) -> set[str]:
    """The parameters the gate sets: ``gamma`` scalars, or the layers ``out_gain`` initialises."""
    if mechanism_of(token).params["gate"] == "gamma_init":
        return {n for n, _ in module.named_parameters() if n.rsplit(".", 1)[-1].split("_")[0] == "gamma"}
    return {n for n, _ in module.named_parameters() if n.rsplit(".", 1)[0] in OUT_LAYERS[token]}


def first_step(module: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor, dict, dict]:
    """Input, output at init, each parameter's gradient and its value after one SGD step."""
    torch.manual_seed(1)
    x = torch.randn(4, 16, 8, 8, dtype=torch.float64)  # batch 4: IAU's last BN sees one vector per sample
    y = module(x)
    (y * torch.randn_like(y)).sum().backward()
    grads = {n: p.grad.clone() for n, p in module.named_parameters()}
    torch.optim.SGD(module.parameters(), lr=0.1).step()
    return x, y.detach(), grads, {n: p.detach().clone() for n, p in module.named_parameters()}


def test_gate_is_offered_by_every_mechanism_whose_branch_starts_at_zero():
    assert GATED[1:] == ("dynamic", "area", "gc", "nonlocal", "a2", "da", "ann", "iau", "cc")
    assert set(OUT_LAYERS) == {t for t in GATED if mechanism_of(t).params["gate"] == "out_gain"}
    assert {mechanism_of(t).params["gate"] for t in GATED} == {"gamma_init", "out_gain"}
    assert mechanism_of("1111") is GENERALIZED_ATTENTION
    x = torch.randn(2, 16, 8, 8, dtype=torch.float64)
    for token in UNGATED:
        if mechanism_of(token).placement != "head":  # a decode head's context is no residual block
            assert not torch.equal(build(token)(x), x), f"{token} starts as the identity but takes no gate"


@pytest.mark.parametrize("token", GATED)
def test_closed_only_the_gate_learns_at_the_first_step(token):
    module = build(token)
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    gates = gate_names(token, module)
    x, y, grads, after = first_step(module)
    assert gates and torch.equal(y, x)
    assert all(grads[n].any() for n in gates)
    assert [n for n in grads if n not in gates and grads[n].any()] == []
    assert [n for n in after if n not in gates and not torch.equal(after[n], before[n])] == []


@pytest.mark.parametrize("token", GATED)
def test_open_every_weight_learns_at_the_first_step(token):
    module = build(f"{token}:gate=1")
    x, y, grads, _ = first_step(module)
    assert not torch.allclose(y, x)
    silent = NO_GRADIENT.get(token, {})
    assert {n: float(g.abs().max()) for n, g in grads.items() if n not in silent and g.abs().max() < 1e-8} == {}
    assert {n: float(grads[n].abs().max()) for n in silent if grads[n].abs().max() > 1e-10} == {}


@pytest.mark.parametrize("token", GATED)
def test_gate_0_is_the_default_and_draws_nothing(token):
    closed = build(token)
    after_default = torch.get_rng_state()
    explicit = build(f"{token}:gate=0")
    assert torch.equal(torch.get_rng_state(), after_default)
    for (name, p), q in zip(closed.state_dict().items(), explicit.state_dict().values()):
        assert torch.equal(p, q), name


@pytest.mark.parametrize("token", GATED)
def test_gate_in_the_grammar(token):
    variant = Variant.parse(f"{token}:gate=0.5")
    assert variant.name == f"{token}:gate=0.5" and Variant.parse(variant.name) == variant
    (plugin,) = variant.backbone_overrides()["plugins"]
    assert plugin["cfg"][mechanism_of(token).params["gate"]] == 0.5
    one, scaled = build(f"{token}:gate=1"), build(f"{token}:gate=-2")
    for name in gate_names(token, one):  # a gamma or norm weight is the gate, a conv's weights scale by it
        torch.testing.assert_close(scaled.get_parameter(name), -2 * one.get_parameter(name), rtol=0, atol=0)


@pytest.mark.parametrize("token", UNGATED)
def test_a_mechanism_without_a_zero_start_refuses_gate(token):
    with pytest.raises(ValueError, match=f"{token} takes .*, not 'gate'"):
        Variant.parse(f"{token}:gate=1")


def test_gate_is_a_vision_parameter():
    with pytest.raises(ValueError, match="'gate' applies to vision tasks only"):
        Variant.parse("dynamic:gate=1").translation_config()
