"""The second demo learns: a character LSTM on standard-library sources beats the unigram
baseline on held-out text within a fixed number of steps (deterministic for its seed)."""
import warnings

import numpy as np

import tracegrad as tg
from tracegrad import demo_text


def test_char_lstm_learns_well_below_the_unigram_baseline(tmp_path, capsys):
    res = demo_text.main(["--max-steps", "200", "--seconds", "600", "--quiet", "--out", str(tmp_path)])
    assert res["steps"] == 200
    assert res["val"] < 0.8 * res["baseline"], res
    out = capsys.readouterr().out
    assert "held-out loss" in out and "sampled text:" in out
    assert (tmp_path / "text_loss.png").stat().st_size > 1000


def test_compiled_training_steps_follow_eager_ones_bit_for_bit(tmp_path):
    """--compile makes forward, backward, clipping and Adam's update one program; the learning
    rate the schedule changes every step is read at every call (no recompile)."""
    args = ["--max-steps", "6", "--seconds", "600", "--quiet", "--no-plot", "--hidden", "16", "--out", str(tmp_path)]
    eager = demo_text.main(args)
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # traced whole: no fallback, no recompile-limit warning
        compiled = demo_text.main(args + ["--compile"])
    assert compiled["val"] == eager["val"] and compiled["steps"] == 6


def test_compiled_loss_of_the_text_model_equals_eager():
    tg.manual_seed(0)
    model = demo_text.CharLSTM(20, embed=8, hidden=16)
    x = tg.randint(0, 20, (4, 6))
    y = tg.randint(0, 20, (4, 6))

    def loss_of(x, y):
        logits, _ = model(x)
        return tg.nn.functional.cross_entropy(logits.reshape(-1, 20), y.reshape(-1))

    eager = loss_of(x, y)
    eager.backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    compiled = tg.compile(loss_of)(x, y)
    compiled.backward()
    np.testing.assert_allclose(compiled.item(), eager.item(), rtol=1e-5)
    for p, g in zip(model.parameters(), grads):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-4, atol=1e-6)
