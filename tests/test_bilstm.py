"""The paper's BiLSTM (``tagging.bilstm.BiLSTMStack``): the unpacked fused path equals torch's own
packed bidirectional LSTM, variational dropout, padding and empty rows."""

from __future__ import annotations

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from spacy_elmo_mix.tagging.bilstm import BiLSTMStack, length_groups

LENGTHS = [12, 1, 7, 12, 3, 9]


def packed_reference(stack: BiLSTMStack, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """What the stack computes, through torch's packed bidirectional ``nn.LSTM`` (no dropout)."""
    x = inputs
    for lstm in stack.lstms:
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        x, _ = pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=inputs.shape[1])
    return x


def _batch(dtype, n_in: int = 8, seed: int = 0, sizes=LENGTHS):
    """Seeded random inputs for sentences of ``sizes`` tokens, zero past each length, and the lengths."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(sizes)
    real = (torch.arange(max(sizes)) < lengths.unsqueeze(1)).unsqueeze(2)
    return (torch.randn(len(sizes), max(sizes), n_in, generator=gen, dtype=dtype) * real), lengths


def test_unpacked_path_equals_the_packed_lstm_in_float64():
    """The same algorithm (forward over the padded rows, backward over each sentence reversed within
    its length): outputs and input gradients agree with torch's packed LSTM to float64 rounding."""
    torch.manual_seed(1)
    stack = BiLSTMStack(8, 5, 2, dropout=0.0, recurrent_dropout=0.0).double().train()
    x, lengths = _batch(torch.float64)
    ours_in, ref_in = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ours, ref = stack(ours_in, lengths), packed_reference(stack, ref_in, lengths)
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)
    weights = torch.randn(ours.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    (ours * weights).sum().backward()
    (ref * weights).sum().backward()
    torch.testing.assert_close(ours_in.grad, ref_in.grad, rtol=1e-12, atol=1e-12)


def test_fused_float32_path_within_float32_error_of_the_reference():
    """float32 (the fused kernel, e.g. oneDNN on CPU) against the float64 reference.

    Error analysis: each gate's pre-activation is a dot product of K = input width + width terms, off by at
    most K * u * S (u = 2**-24, S = the largest sum of |w x| + |w h| + |b| over the gates, |h| <= 1);
    the gate functions are 1-Lipschitz, and the cell state adds each step's error (forget gate <= 1)
    over at most L steps; the second layer sees the first one's error through weights whose row sums
    S bounds again. Hence |diff| <= depth * L * K * u * S * (1 + S), with a factor 2 of margin.
    """
    torch.manual_seed(3)
    stack = BiLSTMStack(8, 5, 2, dropout=0.0, recurrent_dropout=0.0).eval()
    x, lengths = _batch(torch.float32)
    with torch.no_grad():
        ours = stack(x, lengths)
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
        reference = packed_reference(stack.double(), x.double(), lengths)
    bound = 2 * len(stack.lstms) * steps * terms * 2.0**-24 * scale * (1 + scale)
    diff = float((ours.double() - reference).abs().max())
    assert diff <= bound, (diff, bound)


def test_bilstm_variational_dropout_keeps_one_mask_per_sentence():
    torch.manual_seed(0)
    stack = BiLSTMStack(4, 3, 1, dropout=0.5, recurrent_dropout=0.0)
    x = torch.ones(2, 5, 4)
    dropped = stack._locked(x, torch.arange(2))
    assert torch.equal(dropped[:, :1].expand_as(dropped), dropped)  # the same features dropped at every step
    assert set(dropped.unique().tolist()) <= {0.0, 2.0}
    stack.eval()
    assert torch.equal(stack._locked(x, torch.arange(2)), x)


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
    x, lengths = torch.randn(2, 5, 4), torch.tensor([5, 3])
    stack.eval()
    plain = stack(x, lengths)
    stack.train()
    assert not torch.allclose(stack(x, lengths), plain)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bilstm_output_ignores_padding_and_handles_empty_rows(dtype):
    torch.manual_seed(0)
    stack = BiLSTMStack(3, 4, 2, dropout=0.0, recurrent_dropout=0.0).to(dtype).eval()
    x = torch.randn(3, 6, 3, dtype=dtype)
    x[1, 2:] = 1e3  # padding with large values changes nothing
    lengths = torch.tensor([6, 2, 0])
    out = stack(x, lengths)
    alone = stack(x[1:2, :2], torch.tensor([2]))
    # other batch shapes give other GEMM blockings: last-bit differences only (float32 defaults: rtol 1.3e-6, ~10 ulp)
    torch.testing.assert_close(out[1, :2], alone[0])
    assert out.shape == (3, 6, 8) and torch.count_nonzero(out[2]) == 0 and torch.count_nonzero(out[1, 2:]) == 0


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


def test_length_groups_cover_the_batch_in_contiguous_groups():
    lengths = sorted(CONLL_LENGTHS)
    groups = length_groups(lengths)
    assert groups[0][0] == 0 and groups[-1][1] == len(lengths)
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(groups, groups[1:]))
    assert len(groups) > 1  # lengths 1-60: padding to 60 costs more than a second call
    assert length_groups([12] * 32) == [(0, 32)]  # equal lengths: nothing to save
    assert length_groups([3]) == [(0, 1)] and length_groups([]) == []
    with pytest.raises(ValueError, match="sorted"):
        length_groups([5, 3])


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


def test_grouped_stack_in_training_equals_the_packed_lstm_with_the_same_masks():
    """Length groups change no sentence's arithmetic and draw the documented dropout masks: in
    float64, with both dropouts on, outputs and gradients (input and weights) equal torch's packed
    LSTM run with the masks drawn in the batch's own order."""
    x, lengths = _batch(torch.float64, 6, sizes=CONLL_LENGTHS)
    assert len(length_groups(sorted(CONLL_LENGTHS))) > 1
    torch.manual_seed(4)
    stack = BiLSTMStack(6, 5, 2, dropout=0.5, recurrent_dropout=0.5).double().train()
    weights = torch.linspace(-1, 1, x.shape[0] * x.shape[1] * 10, dtype=torch.float64).view(*x.shape[:2], 10)
    results = []
    for run in (stack, lambda inputs, lengths: _masked_packed_reference(stack, inputs, lengths)):
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


def test_grouped_stack_equals_the_packed_lstm_in_float64():
    torch.manual_seed(5)
    stack = BiLSTMStack(6, 5, 2, dropout=0.0, recurrent_dropout=0.0).double().eval()
    x, lengths = _batch(torch.float64, 6, seed=1, sizes=CONLL_LENGTHS)
    assert len(length_groups(sorted(CONLL_LENGTHS))) > 1
    torch.testing.assert_close(stack(x, lengths), packed_reference(stack, x, lengths), rtol=1e-12, atol=1e-12)
