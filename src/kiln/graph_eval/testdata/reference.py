"""Independent numpy reference implementations used to compute the expected values pasted into
the kiln_graph_eval unit tests. Run with /usr/bin/python3 (Debian's numpy). Not used by the build.

Usage: /usr/bin/python3 src/kiln/ops/testdata/reference.py  (prints every case)
"""
import itertools
import numpy as np


def pattern(count, mul, add, mod, div):
    """Mirror of kiln::ops::testing::pattern in op_test_util.h."""
    i = np.arange(count, dtype=np.int64)
    return ((i * mul + add) % mod - mod // 2).astype(np.float64) / div


def same_pads(in_dims, kernel, strides, dilations, upper):
    begins, ends = [], []
    for i, k, s, d in zip(in_dims, kernel, strides, dilations):
        out = -(-i // s)
        total = max(0, (out - 1) * s + d * (k - 1) + 1 - i)
        small, large = total // 2, total - total // 2
        begins.append(small if upper else large)
        ends.append(large if upper else small)
    return begins + ends


def conv(x, w, b=None, strides=None, pads=None, dilations=None, group=1):
    r = x.ndim - 2
    strides = strides or [1] * r
    dilations = dilations or [1] * r
    pads = pads or [0] * (2 * r)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[r + i]) for i in range(r)])
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    k = w.shape[2:]
    out_sp = [(xp.shape[2 + i] - dilations[i] * (k[i] - 1) - 1) // strides[i] + 1 for i in range(r)]
    y = np.zeros([n, m] + out_sp)
    mg = m // group
    for nn in range(n):
        for mm in range(m):
            g = mm // mg
            for pos in itertools.product(*[range(o) for o in out_sp]):
                sl = tuple(slice(pos[i] * strides[i],
                                 pos[i] * strides[i] + dilations[i] * (k[i] - 1) + 1,
                                 dilations[i]) for i in range(r))
                win = xp[(nn, slice(g * cg, (g + 1) * cg)) + sl]
                y[(nn, mm) + pos] = np.sum(win * w[mm])
            if b is not None:
                y[nn, mm] += b[mm]
    return y


def pool(x, kernel, strides=None, pads=None, dilations=None, ceil_mode=False, mode="max",
         count_include_pad=False):
    r = x.ndim - 2
    strides = strides or [1] * r
    dilations = dilations or [1] * r
    pads = pads or [0] * (2 * r)
    out_sp = []
    for i in range(r):
        span = x.shape[2 + i] + pads[i] + pads[r + i] - dilations[i] * (kernel[i] - 1) - 1
        out = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
        if ceil_mode and (out - 1) * strides[i] >= x.shape[2 + i] + pads[i]:
            out -= 1  # a last window starting in the end padding is dropped
        out_sp.append(out)
    y = np.zeros(list(x.shape[:2]) + out_sp)
    for nc in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for pos in itertools.product(*[range(o) for o in out_sp]):
            vals, padded_count = [], 1
            axes = []
            for i in range(r):
                idx = [pos[i] * strides[i] - pads[i] + kk * dilations[i] for kk in range(kernel[i])]
                padded_count *= sum(1 for t in idx if -pads[i] <= t < x.shape[2 + i] + pads[r + i])
                axes.append([t for t in idx if 0 <= t < x.shape[2 + i]])
            for p in itertools.product(*axes):
                vals.append(x[nc + p])
            if mode == "max":
                y[nc + pos] = max(vals)
            else:
                y[nc + pos] = sum(vals) / (padded_count if count_include_pad else len(vals))
    return y


def fmt(a):
    flat = np.asarray(a, dtype=np.float64).reshape(-1)
    return "{" + ", ".join(repr(float(v)) if v != int(v) or abs(v) > 1e15 else str(int(v)) + ".0"
                           for v in flat) + "}"


def show(name, a):
    print(f"// {name}: shape {list(np.shape(a))}")
    print(fmt(a))
