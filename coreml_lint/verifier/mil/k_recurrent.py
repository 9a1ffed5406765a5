"""``lstm`` and ``rnn`` as the op documentation writes them (no value_inference in
coremltools). The CoreMLPartitioner keeps a supported ``aten.lstm`` whole, so an ``nn.LSTM``
reaches Core ML as one ``lstm`` op per layer.

lstm: gates in ``[input, forget, output, cell]`` order (``ifoz``), one bias (input-hidden
plus hidden-hidden), optional peepholes (``ifo``); ``c_t = f * c + i * z``,
``h_t = o * activation(c_t)``. A ``bidirectional`` op runs the ``*_back`` weights over the
reversed sequence and concatenates ``[forward, backward]`` along the hidden axis; with
``output_sequence`` False the first output is the final step's hidden state. Outputs: the
hidden states, the final hidden state, the final cell state (lstm only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from coreml_lint.verifier.mil.registry import OWN, Unsupported, kernel


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
    "relu": lambda v: np.maximum(v, 0.0),
    "linear": lambda v: v,
}


def _activation(name: Any) -> Callable[[np.ndarray], np.ndarray]:
    found = ACTIVATIONS.get(str(name))
    if found is None:  # hard_sigmoid / scaled_tanh take alpha/beta the op does not carry
        raise Unsupported(f"recurrent activation {name}")
    return found


def _f64(value: Any) -> np.ndarray | None:
    return None if value is None else np.asarray(value, dtype=np.float64)


def _lstm_direction(x, h, c, w_ih, w_hh, bias, peephole, acts, reverse):
    """One direction over ``x`` [s, b, I]: every step's h, and the final h and c."""
    rec, cell, out = acts
    hidden = h.shape[-1]
    bias = np.zeros(4 * hidden) if bias is None else bias
    p_i, p_f, p_o = np.split(np.zeros(3 * hidden) if peephole is None else peephole, 3)
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    seq = np.zeros((x.shape[0], x.shape[1], hidden))
    for t in steps:
        gates = x[t] @ w_ih.T + h @ w_hh.T + bias
        g_i, g_f, g_o, g_z = np.split(gates, 4, axis=-1)
        i, f, z = rec(g_i + p_i * c), rec(g_f + p_f * c), cell(g_z)
        c = f * c + i * z
        o = rec(g_o + p_o * c)
        h = o * out(c)
        seq[t] = h
    return seq, h, c


@kernel("lstm", how=OWN)
def _lstm(op: Any, a: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if a.get("clip") is not None:
        raise Unsupported("lstm with clip (the documentation does not say what is clipped)")
    x, h0, c0 = (_f64(a[k]) for k in ("x", "initial_h", "initial_c"))
    named = (
        ("recurrent_activation", "sigmoid"),
        ("cell_activation", "tanh"),
        ("activation", "tanh"),
    )
    acts = tuple(_activation(a.get(k, d)) for k, d in named)
    direction = str(a.get("direction", "forward"))
    weights = [_f64(a.get(k)) for k in ("weight_ih", "weight_hh", "bias", "peephole")]
    hidden = weights[1].shape[-1]
    if direction != "bidirectional":
        seq, h, c = _lstm_direction(x, h0, c0, *weights, acts, direction == "reverse")
        return _sequence(seq, h, a), h, c
    back = [_f64(a.get(k)) for k in ("weight_ih_back", "weight_hh_back", "bias_back")]
    back.append(_f64(a.get("peephole_back")))
    fwd = _lstm_direction(x, h0[:, :hidden], c0[:, :hidden], *weights, acts, False)
    bwd = _lstm_direction(x, h0[:, hidden:], c0[:, hidden:], *back, acts, True)
    seq = np.concatenate([fwd[0], bwd[0]], axis=-1)
    h, c = np.concatenate([fwd[1], bwd[1]], -1), np.concatenate([fwd[2], bwd[2]], -1)
    if not bool(a.get("output_sequence", False)):
        return h[None], h, c
    return seq, h, c


def _sequence(seq: np.ndarray, h: np.ndarray, a: dict[str, Any]) -> np.ndarray:
    return seq if bool(a.get("output_sequence", False)) else h[None]


@kernel("rnn", how=OWN)
def _rnn(op: Any, a: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    x, h = _f64(a["x"]), _f64(a["initial_h"])
    w_ih, w_hh, bias = _f64(a["weight_ih"]), _f64(a["weight_hh"]), _f64(a.get("bias"))
    bias = np.zeros(w_ih.shape[0]) if bias is None else bias
    act = _activation(a.get("activation", "tanh"))
    reverse = str(a.get("direction", "forward")) == "reverse"
    seq = np.zeros((x.shape[0], x.shape[1], w_ih.shape[0]))
    for t in range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0]):
        h = act(x[t] @ w_ih.T + h @ w_hh.T + bias)
        seq[t] = h
    return _sequence(seq, h, a), h
