"""Expected values for recurrent_test.cc, from PyTorch's nn.LSTM / nn.GRU / nn.RNN (an
implementation independent of kiln's). Run: /usr/bin/python3 recurrent_cases.py

Inputs are kiln::testing::pattern(count, mul, add, mod, div) reshaped to the ONNX layouts; the
ONNX weights are mapped to torch's gate order (LSTM: ONNX i,o,f,c -> torch i,f,g,o; GRU: ONNX
z,r,h -> torch r,z,n, which is linear_before_reset = 1). A batch entry with sequence length L is
run alone on its first L steps; ONNX's Y is 0 past L."""
import numpy as np
import torch


def pattern(count, mul, add, mod, div):
    i = np.arange(count, dtype=np.int64)
    return ((i * mul + add) % mod - mod // 2) / div


def show(name, a):
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    print(f"// {name}")
    print("{" + ", ".join(f"{v:.9g}" for v in a) + "}")


SEQ, BATCH, INPUT, HIDDEN = 3, 3, 2, 3


def reorder(m, cell):
    """ONNX gate blocks (rows of m, last axis kept) -> torch order."""
    h = HIDDEN
    blocks = [m[k * h:(k + 1) * h] for k in range(m.shape[0] // h)]
    if cell == "lstm":  # i o f c -> i f g o
        i, o, f, c = blocks
        return np.concatenate([i, f, c, o])
    if cell == "gru":  # z r h -> r z n
        z, r, hh = blocks
        return np.concatenate([r, z, hh])
    return m


def run(cell, gates, lens, nonlinearity="tanh"):
    d = 2
    x = pattern(SEQ * BATCH * INPUT, 7, 3, 11, 4).reshape(SEQ, BATCH, INPUT)
    w = pattern(d * gates * HIDDEN * INPUT, 5, 1, 9, 8).reshape(d, gates * HIDDEN, INPUT)
    r = pattern(d * gates * HIDDEN * HIDDEN, 3, 2, 7, 8).reshape(d, gates * HIDDEN, HIDDEN)
    b = pattern(d * 2 * gates * HIDDEN, 11, 4, 13, 16).reshape(d, 2 * gates * HIDDEN)
    h0 = pattern(d * BATCH * HIDDEN, 2, 1, 5, 4).reshape(d, BATCH, HIDDEN)
    c0 = pattern(d * BATCH * HIDDEN, 3, 0, 7, 4).reshape(d, BATCH, HIDDEN)
    if cell == "lstm":
        m = torch.nn.LSTM(INPUT, HIDDEN, bidirectional=True).double()
    elif cell == "gru":
        m = torch.nn.GRU(INPUT, HIDDEN, bidirectional=True).double()
    else:
        m = torch.nn.RNN(INPUT, HIDDEN, bidirectional=True, nonlinearity=nonlinearity).double()
    gh = gates * HIDDEN
    with torch.no_grad():
        for k, suffix in enumerate(["", "_reverse"]):
            getattr(m, "weight_ih_l0" + suffix).copy_(torch.tensor(reorder(w[k], cell)))
            getattr(m, "weight_hh_l0" + suffix).copy_(torch.tensor(reorder(r[k], cell)))
            getattr(m, "bias_ih_l0" + suffix).copy_(torch.tensor(reorder(b[k, :gh], cell)))
            getattr(m, "bias_hh_l0" + suffix).copy_(torch.tensor(reorder(b[k, gh:], cell)))
    y = np.zeros((SEQ, d, BATCH, HIDDEN))
    yh = np.zeros((d, BATCH, HIDDEN))
    yc = np.zeros((d, BATCH, HIDDEN))
    for n in range(BATCH):
        L = lens[n]
        xs = torch.tensor(x[:L, n:n + 1])
        h = torch.tensor(h0[:, n:n + 1].copy())
        with torch.no_grad():
            if cell == "lstm":
                out, (hn, cn) = m(xs, (h, torch.tensor(c0[:, n:n + 1].copy())))
                yc[:, n] = cn[:, 0].numpy()
            else:
                out, hn = m(xs, h)
        y[:L, :, n] = out[:, 0].numpy().reshape(L, d, HIDDEN)
        yh[:, n] = hn[:, 0].numpy()
    return y, yh, yc


for cell, gates in [("lstm", 4), ("gru", 3), ("rnn", 1)]:
    y, yh, yc = run(cell, gates, [3, 1, 2])
    show(f"{cell} Y (sequence_lens 3, 1, 2)", y)
    show(f"{cell} Y_h", yh)
    if cell == "lstm":
        show(f"{cell} Y_c", yc)
# layout 1: the full-length LSTM as [batch, seq, dirs, hidden] and [batch, dirs, hidden].
y, yh, yc = run("lstm", 4, [3, 3, 3])
show("lstm layout 1 Y", y.transpose(2, 0, 1, 3))
show("lstm layout 1 Y_h", yh.transpose(1, 0, 2))
show("lstm layout 1 Y_c", yc.transpose(1, 0, 2))
y, yh, _ = run("rnn", 1, [3, 3, 3])
show("rnn full-length Y_h", yh)
y, _, _ = run("rnn", 1, [3, 3, 3], "relu")
show("rnn relu Y", y)
