"""The paper's BiLSTM (``tagging.bilstm.BiLSTMStack``): its step-packed CPU kernel
(``tagging.packed_lstm``) and its padded fused path (torch's LSTM, the GPU's) equal torch's own packed
bidirectional LSTM; variational dropout, empty rows, oneDNN's products against numpy's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from spacy_elmo_mix.tagging import packed_lstm
from spacy_elmo_mix.tagging.bilstm import BiLSTMStack

LENGTHS = [12, 1, 7, 12, 3, 9]


def packed_reference(stack: BiLSTMStack, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """What the stack computes, through torch's packed bidirectional ``nn.LSTM`` (no dropout)."""
    x = inputs
    for lstm in stack.lstms:
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        x, _ = pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=inputs.shape[1])
    return x


def flat(padded: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[B, L, D] -> [N, D]: each sentence's real positions, one after another (the stack's input)."""
    return padded[torch.arange(padded.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)]


def _batch(dtype, n_in: int = 8, seed: int = 0, sizes=LENGTHS):
    """Seeded random inputs for sentences of ``sizes`` tokens, zero past each length, and the lengths."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(sizes)
    real = (torch.arange(max(sizes)) < lengths.unsqueeze(1)).unsqueeze(2)
    return (torch.randn(len(sizes), max(sizes), n_in, generator=gen, dtype=dtype) * real), lengths


@pytest.mark.parametrize("path", ["kernel", "padded"])
def test_both_paths_equal_the_packed_lstm_in_float64(path):
    """The same algorithm: outputs, input and weight gradients agree with torch's packed LSTM to
    float64 rounding, for the step-packed kernel (CPU) and the padded fused path (GPU)."""
    torch.manual_seed(1)
    stack = BiLSTMStack(8, 5, 2, dropout=0.0, recurrent_dropout=0.0).double().train()
    x, lengths = _batch(torch.float64)
    ours_in, ref_in = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ours = stack(flat(ours_in, lengths), lengths) if path == "kernel" else flat(stack.padded(ours_in, lengths), lengths)
    ref = flat(packed_reference(stack, ref_in, lengths), lengths)
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)
    weights = torch.randn(ours.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    (ours * weights).sum().backward()
    grads = [p.grad.clone() for p in stack.parameters()]
    stack.zero_grad()
    (ref * weights).sum().backward()
    torch.testing.assert_close(ours_in.grad, ref_in.grad, rtol=1e-12, atol=1e-12)
    for grad, param in zip(grads, stack.parameters()):
        torch.testing.assert_close(grad, param.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("onednn", [True, False])
def test_fused_float32_path_within_float32_error_of_the_reference(onednn, monkeypatch):
    """float32 (the fused kernel, e.g. oneDNN on CPU) against the float64 reference.

    Error analysis: each gate's pre-activation is a dot product of K = input width + width terms, off by at
    most K * u * S (u = 2**-24, S = the largest sum of |w x| + |w h| + |b| over the gates, |h| <= 1);
    the gate functions are 1-Lipschitz, and the cell state adds each step's error (forget gate <= 1)
    over at most L steps; the second layer sees the first one's error through weights whose row sums
    S bounds again. Hence |diff| <= depth * L * K * u * S * (1 + S), with a factor 2 of margin.
    """
    if not onednn:
        monkeypatch.setattr(packed_lstm, "_LINEAR", None)  # numpy's products
    elif packed_lstm._LINEAR is None:
        pytest.skip("this torch has no oneDNN product (torch.ops.mkldnn._linear_pointwise)")
    torch.manual_seed(3)
    stack = BiLSTMStack(8, 5, 2, dropout=0.0, recurrent_dropout=0.0).eval()
    x, lengths = _batch(torch.float32)
    with torch.no_grad():
        ours = stack(flat(x, lengths), lengths)
        steps, terms = max(LENGTHS), max(8, 2 * 5) + 5
        scale = max(
            float(
                (
                    lstm.weight_ih_l0.abs().sum(1) * max(1.0, float(x.abs().max()))
                    + lstm.weight_hh_l0.abs().sum(1)
                    + (lstm.bias_ih_l0 + lstm.bias_hh_l0).abs()
                ).max()
            )
            for lstm in stack.lstms
        )
        reference = flat(packed_reference(stack.double(), x.double(), lengths), lengths)
    bound = 2 * len(stack.lstms) * steps * terms * 2.0**-24 * scale * (1 + scale)
    diff = float((ours.double() - reference).abs().max())
    assert diff <= bound, (diff, bound)


def test_bilstm_variational_dropout_keeps_one_mask_per_sentence():
    torch.manual_seed(0)
    stack = BiLSTMStack(4, 3, 1, dropout=0.5, recurrent_dropout=0.0)
    x = torch.ones(9, 4)
    sentence = torch.tensor([0] * 5 + [1] * 4)
    torch.manual_seed(1)
    dropped = stack._locked_tokens(x, sentence, 2)
    for rows in (dropped[:5], dropped[5:]):  # the same features dropped at every step of a sentence
        assert torch.equal(rows[:1].expand_as(rows), rows)
    assert set(dropped.unique().tolist()) <= {0.0, 2.0}
    torch.manual_seed(1)
    padded = stack._locked(torch.ones(2, 5, 4))  # the padded path draws the same masks
    assert torch.equal(padded[:, 0], dropped[[0, 5]])
    stack.eval()
    assert torch.equal(stack._locked_tokens(x, sentence, 2), x)


def test_bilstm_recurrent_dropout_zeroes_hidden_columns_in_training_only():
    torch.manual_seed(0)
    stack = BiLSTMStack(4, 6, 1, dropout=0.0, recurrent_dropout=0.5)
    lstm = stack.lstms[0]
    weights = stack._recurrent_weights(lstm)
    for name in ("weight_hh_l0", "weight_hh_l0_reverse"):
        ratio = weights[name] / getattr(lstm, name)
        columns = ratio[0]
        assert set(columns.round(decimals=5).unique().tolist()) <= {0.0, 2.0}
        assert torch.allclose(ratio, columns.expand_as(ratio))  # whole columns: units of h_{t-1}
    stack.eval()
    assert all(weights is param for weights, param in zip(stack._recurrent_weights(lstm).values(), lstm.parameters()))


def test_recurrent_dropout_reaches_the_output_in_training():
    """The masked hidden-to-hidden weights are the ones the LSTM runs with (training only)."""
    torch.manual_seed(0)
    stack = BiLSTMStack(4, 6, 1, dropout=0.0, recurrent_dropout=0.5)
    x, lengths = torch.randn(8, 4), torch.tensor([5, 3])
    stack.eval()
    plain = stack(x, lengths)
    stack.train()
    assert not torch.allclose(stack(x, lengths), plain)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bilstm_sentences_are_independent_and_empty_ones_have_no_rows(dtype):
    torch.manual_seed(0)
    stack = BiLSTMStack(3, 4, 2, dropout=0.0, recurrent_dropout=0.0).to(dtype).eval()
    x = torch.randn(8, 3, dtype=dtype)
    out = stack(x, torch.tensor([6, 0, 2]))
    alone = stack(x[6:], torch.tensor([2]))
    # other batch shapes give other GEMM blockings: last-bit differences only (float32 defaults: rtol 1.3e-6, ~10 ulp)
    torch.testing.assert_close(out[6:], alone)
    assert out.shape == (8, 8) and stack(x[:0], torch.tensor([0, 0])).shape == (0, 8)
    padded = stack.padded(torch.zeros(2, 3, 3, dtype=dtype), torch.tensor([0, 3]))
    assert torch.count_nonzero(padded[0]) == 0  # the padded path: an empty row is zero
    with pytest.raises(ValueError, match="rows"):
        stack(x, torch.tensor([3, 3]))


# 32 sentences of CoNLL-like lengths (1-60 tokens, in no order): the stack splits them into groups
CONLL_LENGTHS = [
    23,
    5,
    41,
    17,
    2,
    33,
    60,
    11,
    28,
    9,
    14,
    38,
    1,
    25,
    19,
    7,
    44,
    30,
    12,
    3,
    21,
    52,
    16,
    27,
    8,
    35,
    13,
    6,
    24,
    31,
    18,
    10,
]


def _masked_packed_reference(stack: BiLSTMStack, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The stack in training, through torch's packed ``nn.LSTM``, with the dropout masks drawn as
    documented: per layer one mask per sentence over its input features, in the batch's own order,
    then one over the hidden units per direction; one more over the output."""
    keep_in, keep_h = 1 - stack.dropout, 1 - stack.recurrent_dropout

    def locked(x):
        return x * x.new_empty(x.shape[0], 1, x.shape[2]).bernoulli_(keep_in).div_(keep_in)

    x = inputs
    for lstm in stack.lstms:
        x = locked(x)
        params = {
            name: weight * weight.new_empty(weight.shape[1]).bernoulli_(keep_h).div_(keep_h)
            if name.startswith("weight_hh")
            else weight
            for name, weight in lstm.named_parameters()
        }
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out = torch.func.functional_call(lstm, params, (packed,))[0]
        x, _ = pad_packed_sequence(out, batch_first=True, total_length=inputs.shape[1])
    return locked(x)


@pytest.mark.parametrize("path", ["kernel", "padded"])
def test_stack_in_training_equals_the_packed_lstm_with_the_same_masks(path):
    """Both paths draw the documented dropout masks: in float64, with both dropouts on, outputs and
    gradients (input and weights) equal torch's packed LSTM run with the masks drawn in the batch's
    own order."""
    x, lengths = _batch(torch.float64, 6, sizes=CONLL_LENGTHS)
    torch.manual_seed(4)
    stack = BiLSTMStack(6, 5, 2, dropout=0.5, recurrent_dropout=0.5).double().train()
    weights = torch.linspace(-1, 1, x.shape[0] * x.shape[1] * 10, dtype=torch.float64).view(*x.shape[:2], 10)
    weights = flat(weights, lengths)
    ours = {
        "kernel": lambda inputs, lengths: stack(flat(inputs, lengths), lengths),
        "padded": lambda inputs, lengths: flat(stack.padded(inputs, lengths), lengths),
    }[path]
    results = []
    for run in (ours, lambda inputs, lengths: flat(_masked_packed_reference(stack, inputs, lengths), lengths)):
        inputs = x.clone().requires_grad_(True)
        stack.zero_grad()
        torch.manual_seed(7)
        out = run(inputs, lengths)
        (out * weights).sum().backward()
        results.append((out.detach(), inputs.grad, [p.grad.clone() for p in stack.parameters()]))
    (out, dx, dw), (out_ref, dx_ref, dw_ref) = results
    assert torch.count_nonzero(out) > 0
    torch.testing.assert_close(out, out_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dx, dx_ref, rtol=1e-12, atol=1e-12)
    for grad, grad_ref in zip(dw, dw_ref):
        torch.testing.assert_close(grad, grad_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("tokens", ["rows", "inner"])
@pytest.mark.parametrize("shape", [(70, 90, 33), (1, 7, 800), (513, 300, 64)])
def test_products_within_float32_error_of_float64(shape, tokens):
    """``packed_lstm.product`` (oneDNN, the token dimension zero-padded to few shapes, where torch
    has it; numpy otherwise): each entry within the float32 bound of a K-term sum,
    2 K u sum_k |a_ik b_jk| (u = 2**-24), of the float64 product."""
    m, k, n = shape
    a = np.random.default_rng(0).standard_normal((m, k), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((n, k), dtype=np.float32)
    exact = a.astype(np.float64) @ b.T.astype(np.float64)
    bound = 2 * k * 2.0**-24 * (np.abs(a).astype(np.float64) @ np.abs(b).T.astype(np.float64))
    ours = packed_lstm.product(a, b, tokens=tokens)
    assert ours.shape == (m, n) and ours.dtype == np.float32
    assert bool((np.abs(ours - exact) <= bound).all())
