import importlib

import pytest
import torch

from attnbench.attention.separable_bias_attention import separable_bias_attention

sba = importlib.import_module("attnbench.attention.separable_bias_attention")

KEY_SIZE = (3, 5)  # Hk x Wk grid, 15 keys


def explicit(query, key, value, bias_x, bias_y):
    """softmax_j(q_i . k_j + B^x[i, x_j] + B^y[i, y_j]) v_j, every pair written out."""
    n, h, m, _ = value.shape
    num_q = (query if query is not None else bias_x).shape[2]
    logits = torch.zeros(n, h, num_q, m, dtype=torch.float64)
    for j in range(m):
        y, x = divmod(j, KEY_SIZE[1])
        if query is not None:
            logits[..., j] += (query * key[:, :, j:j + 1]).sum(-1)
        if bias_x is not None:
            logits[..., j] += bias_x[..., x] + bias_y[..., y]
    return logits.softmax(-1) @ value


def inputs(with_query, with_bias, num_q=7):
    g = lambda *s: torch.randn(*s, dtype=torch.float64, requires_grad=True)  # noqa: E731
    q, k = (g(2, 3, num_q, 4), g(2, 3, 15, 4)) if with_query else (None, None)
    bx, by = (g(2, 3, num_q, KEY_SIZE[1]), g(2, 3, num_q, KEY_SIZE[0])) if with_bias else (None, None)
    return q, k, g(2, 3, 15, 6), bx, by


@pytest.fixture(params=[1 << 21, 30], ids=["one-chunk", "many-chunks"])
def chunk_elements(request, monkeypatch):
    monkeypatch.setattr(sba, "_CHUNK_ELEMENTS", request.param)


@pytest.mark.parametrize("implementation", ["fused", "chunked"])
@pytest.mark.parametrize("with_query,with_bias", [(True, True), (False, True), (True, False)])
def test_matches_explicit_logits(implementation, with_query, with_bias, chunk_elements):
    q, k, v, bx, by = inputs(with_query, with_bias)
    out = separable_bias_attention(q, k, v, bx, by, KEY_SIZE, implementation)
    torch.testing.assert_close(out, explicit(q, k, v, bx, by))


@pytest.mark.parametrize("with_query", [True, False])
def test_chunked_gradients(with_query, chunk_elements):
    args = [t for t in inputs(with_query, True, num_q=5) if t is not None]

    def fn(*tensors):
        q, k = (tensors[0], tensors[1]) if with_query else (None, None)
        v, bx, by = tensors[-3:]
        return separable_bias_attention(q, k, v, bx, by, KEY_SIZE, "chunked")

    assert torch.autograd.gradcheck(fn, args)


@pytest.mark.parametrize("call,match", [
    (lambda q, k, v, bx, by: separable_bias_attention(q, None, v, bx, by, KEY_SIZE), "given together"),
    (lambda q, k, v, bx, by: separable_bias_attention(q, k, v, bx, None, KEY_SIZE), "given together"),
    (lambda q, k, v, bx, by: separable_bias_attention(None, None, v), "no logit term"),
    (lambda q, k, v, bx, by: separable_bias_attention(q, k, v, bx, by, (4, 4)), "does not match"),
    (lambda q, k, v, bx, by: separable_bias_attention(q, k, v, by, bx, KEY_SIZE), "must end in"),
    (lambda q, k, v, bx, by: separable_bias_attention(q, k, v, bx, by, KEY_SIZE, "magic"), "implementation"),
])
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call(*inputs(True, True))
