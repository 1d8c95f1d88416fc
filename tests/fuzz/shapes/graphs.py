"""Random small ONNX graphs built from the idioms exporters emit on dynamic dims.

Each graph has named symbolic dims (N, S, T, H, W) and comes with the sizes it is valid at: four
size sets (all symbols at their smallest legal value, an odd one, a larger one, another), chosen
to meet the graph's run-time constraints (an even H for a /2 -> x2 skip, T == S for [N,S] + [N,T]).
`make_case(seed, index)` is deterministic: the same (seed, index) gives the same model bytes,
sizes and inputs on every machine.

Every graph is one idiom (the classes of issue 14's measurements) wrapped in optional plain
building blocks before and after it. The idiom's name is the graph's `idiom`, its class (slice,
shape-value, runtime-equal, window, reshape, plain) the graph's `cls`.
"""
from __future__ import annotations

import dataclasses

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


@dataclasses.dataclass
class Rule:
    """Legal sizes of one symbol: >= low, a multiple of `mult`, <= high in the larger sets."""
    low: int = 1
    mult: int = 1
    high: int = 20


@dataclasses.dataclass
class Case:
    name: str          # g<seed>_<index>_<idiom>
    idiom: str
    cls: str
    model: bytes       # serialized ModelProto
    size_sets: list    # [{symbol: size}], four of them
    inputs: list       # [(name, [dims as ints or symbols])], all f32
    description: str


class Builder:
    """A graph under construction: nodes, initializers and inputs with fresh names."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.nodes, self.inits, self.inputs = [], [], []
        self.rules: dict[str, Rule] = {}
        self.aliases: dict[str, str] = {}   # symbol -> symbol it equals at run time
        self.notes: list[str] = []
        self.count = 0

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def input(self, name: str, dims: list, **rules: Rule) -> str:
        self.inputs.append((name, dims))
        for sym, rule in rules.items():
            self.rules[sym] = rule
        for d in dims:
            if isinstance(d, str) and d not in self.rules:
                self.rules[d] = Rule()
        return name

    def const(self, value, dtype=None, base="c") -> str:
        arr = np.asarray(value, dtype=dtype)
        name = self.fresh(base)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def i64(self, values) -> str:
        return self.const(np.array(values, dtype=np.int64), base="k")

    def scalar_i64(self, v) -> str:
        return self.const(np.array(v, dtype=np.int64), base="k")

    def f32(self, value) -> str:
        return self.const(np.asarray(value, dtype=np.float32), base="w")

    def weight(self, shape, fan_in=None) -> str:
        fan_in = fan_in or int(np.prod(shape[1:])) or 1
        w = self.rng.standard_normal(shape) / np.sqrt(fan_in)
        return self.f32(w.astype(np.float32))

    def op(self, op_type: str, inputs: list, outputs: int = 1, **attrs):
        outs = [self.fresh(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.fresh(op_type), **attrs))
        return outs[0] if outputs == 1 else outs

    # Shape idioms, as exporters write them.
    def dim(self, x: str, axis: int) -> str:
        """Dim `axis` of x as a 0-d int64: Shape -> Gather (PyTorch's x.size(axis)), or
        Shape -> Slice -> Squeeze (tf2onnx's strided slice of a shape)."""
        if self.rng.integers(4) == 0:
            part = self.op("Slice", [self.op("Shape", [x]), self.i64([axis]), self.i64([axis + 1]), self.i64([0])])
            return self.op("Squeeze", [part, self.i64([0])])
        return self.op("Gather", [self.op("Shape", [x]), self.scalar_i64(axis)], axis=0)

    def dim1(self, x: str, axis: int) -> str:
        """Dim `axis` of x as a [1] int64, one of the three ways exporters write it."""
        way = self.rng.integers(3)
        if way == 0:
            return self.op("Unsqueeze", [self.dim(x, axis), self.i64([0])])
        if way == 1:
            return self.op("Slice", [self.op("Shape", [x]), self.i64([axis]), self.i64([axis + 1]), self.i64([0])])
        end = {} if axis == -1 else {"end": axis + 1}
        return self.op("Shape", [x], start=axis, **end)

    def unsq(self, scalar: str) -> str:
        return self.op("Unsqueeze", [scalar, self.i64([0])])

    def concat1(self, parts: list) -> str:
        return self.op("Concat", parts, axis=0)


# ---- plain building blocks --------------------------------------------------------------------

UNARY = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "LeakyRelu", "Softsign"]


def unary(b: Builder, x: str) -> str:
    op = UNARY[b.rng.integers(len(UNARY))]
    return b.op(op, [x], alpha=0.1) if op == "LeakyRelu" else b.op(op, [x])


def pointwise(b: Builder, x: str, rank: int) -> str:
    """A shape-preserving block valid at any size: unary, or Add/Mul with a broadcast constant."""
    k = b.rng.integers(4)
    if k == 0:
        return unary(b, x)
    if k == 1:
        return b.op("Add", [x, b.f32(np.float32(b.rng.uniform(-1, 1)))])
    if k == 2:
        return b.op("Mul", [x, b.f32(np.float32(b.rng.uniform(0.5, 1.5)))])
    return b.op("Softmax", [x], axis=-1)


def post_block(b: Builder, y: str, rank: int) -> str:
    """A block after the idiom: any shape in, valid at any size."""
    k = b.rng.integers(6)
    if k <= 2:
        return pointwise(b, y, rank)
    if k == 3:
        return b.op("ReduceSum", [y, b.i64([rank - 1])], keepdims=1)
    if k == 4 and rank >= 2:
        perm = list(range(rank))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        return b.op("Transpose", [y], perm=perm)
    return b.op("Concat", [y, unary(b, y)], axis=int(b.rng.integers(rank)))


def seq_input(b: Builder, name="x", d=None, s="S", **rules):
    d = d or int(b.rng.choice([4, 6, 8]))
    return b.input(name, ["N", s, d], N=Rule(1, 1, 4), **rules), d


def img_input(b: Builder, name="x", c=None, h_rule=Rule(1, 1, 17), w_rule=None):
    c = c or int(b.rng.choice([2, 3, 4]))
    return b.input(name, ["N", c, "H", "W"], N=Rule(1, 1, 3), H=h_rule, W=w_rule or h_rule), c


def conv3(b: Builder, x: str, cin: int, cout: int, **attrs) -> str:
    attrs.setdefault("pads", [1, 1, 1, 1])
    return b.op("Conv", [x, b.weight([cout, cin, 3, 3]), b.weight([cout], fan_in=cin * 9)], kernel_shape=[3, 3],
                **attrs)


# ---- idioms: slices of symbolic dims ---------------------------------------------------------

def slice_of_dim(b: Builder):
    x, d = seq_input(b, S=Rule(2, 1, 24))
    kind = ["from1", "neg_k", "to_neg1", "to_4", "half", "step2", "reverse", "min4", "half_f"][b.rng.integers(9)]
    b.notes.append(kind)
    ax = b.i64([1])
    if kind == "from1":
        y = b.op("Slice", [x, b.i64([1]), b.i64([INT64_MAX]), ax])
    elif kind == "neg_k":
        k = int(b.rng.integers(1, 4))
        y = b.op("Slice", [x, b.i64([-k]), b.i64([INT64_MAX]), ax])
    elif kind == "to_neg1":
        y = b.op("Slice", [x, b.i64([0]), b.i64([-1]), ax])
    elif kind == "to_4":
        y = b.op("Slice", [x, b.i64([0]), b.i64([4]), ax])
    elif kind == "half":  # x[:, S//2:]
        half = b.op("Div", [b.dim(x, 1), b.scalar_i64(2)])
        y = b.op("Slice", [x, b.unsq(half), b.i64([INT64_MAX]), ax])
    elif kind == "half_f":  # x[:, int(S * 0.5):], through Cast to float and back
        s = b.op("Cast", [b.dim(x, 1)], to=TensorProto.FLOAT)
        half = b.op("Cast", [b.op("Floor", [b.op("Mul", [s, b.f32(np.float32(0.5))])])], to=TensorProto.INT64)
        y = b.op("Slice", [x, b.unsq(half), b.i64([INT64_MAX]), ax])
    elif kind == "step2":
        y = b.op("Slice", [x, b.i64([0]), b.i64([INT64_MAX]), ax, b.i64([2])])
    elif kind == "reverse":
        y = b.op("Slice", [x, b.i64([-1]), b.i64([INT64_MIN]), ax, b.i64([-1])])
    else:  # x[:, :min(S, 4)] with the end computed from the shape
        end = b.op("Min", [b.dim1(x, 1), b.i64([4])])
        y = b.op("Slice", [x, b.i64([0]), end, ax])
    if kind in ("from1", "to_neg1") and b.rng.integers(2):
        # roll by one: x[:,1:] ++ x[:,:1] (or the other way) has S again, equal only symbolically
        rest = b.op("Slice", [x, b.i64([0]), b.i64([1]), ax]) if kind == "from1" else \
            b.op("Slice", [x, b.i64([-1]), b.i64([INT64_MAX]), ax])
        y = b.op("Add", [b.op("Concat", [y, rest], axis=1), x])
        b.notes.append("roll+add")
    elif b.rng.integers(2):
        y = b.op("MatMul", [y, b.weight([d, d])])
    return [y], 3


# ---- idioms: values computed from shapes -----------------------------------------------------

def expand_idiom(b: Builder, x: str, d: int) -> str:
    """PyTorch's cls.expand(N, -1, -1): Expand(p, Where(Equal(shape, -1), ones, shape))."""
    p = b.weight([1, 1, d], fan_in=1)
    shape = b.concat1([b.dim1(x, 0), b.i64([-1]), b.i64([-1])])
    if b.rng.integers(2):
        ones = b.op("ConstantOfShape", [b.i64([3])], value=helper.make_tensor("v", TensorProto.INT64, [1], [1]))
        minus = b.op("Mul", [ones, b.scalar_i64(-1)])
        b.notes.append("ones via ConstantOfShape+Mul")
    else:
        ones = b.op("ConstantOfShape", [b.op("Shape", [shape])],
                    value=helper.make_tensor("v", TensorProto.INT64, [1], [1]))
        minus = b.i64([-1, -1, -1])
    target = b.op("Where", [b.op("Equal", [shape, minus]), ones, shape])
    return b.op("Expand", [p, target])


def shape_value(b: Builder):
    kind = ["expand", "arange_f", "arange_i", "cumsum_pos", "causal", "flatten", "numel", "tile", "cos_conv",
            "pad_even", "range_8n", "expand_shape", "size"][b.rng.integers(13)]
    b.notes.append(kind)
    if kind == "cos_conv":
        # Conv on a tensor made by ConstantOfShape from the batch size (issue 14's bound-vs-dynamic break)
        c = int(b.rng.choice([2, 3]))
        x = b.input("x", ["N", c, 5, 5], N=Rule(1, 1, 12))
        full = b.op("ConstantOfShape", [b.op("Shape", [x])],
                    value=helper.make_tensor("v", TensorProto.FLOAT, [1], [float(b.rng.uniform(0.1, 0.9))]))
        y = b.op("Add", [conv3(b, full, c, 4), conv3(b, x, c, 4)])
        return [y], 4
    if kind == "range_8n":  # Range(0, 8*N) as positions for [N, 8]
        x = b.input("x", ["N", 8], N=Rule(1, 1, 6))
        r = b.op("Range", [b.scalar_i64(0), b.op("Mul", [b.dim(x, 0), b.scalar_i64(8)]), b.scalar_i64(1)])
        pos = b.op("Reshape", [b.op("Cast", [r], to=TensorProto.FLOAT), b.i64([-1, 8])])
        return [b.op("Add", [x, b.op("Mul", [pos, b.f32(np.float32(0.01))])])], 2
    x, d = seq_input(b, S=Rule(1, 1, 24))
    if kind == "expand":  # class token: [N, S+1, D]
        y = b.op("Concat", [expand_idiom(b, x, d), x], axis=1)
    elif kind in ("arange_f", "arange_i", "cumsum_pos"):
        if kind == "arange_f":  # torch.arange(S).float()
            s = b.op("Cast", [b.dim(x, 1)], to=TensorProto.FLOAT)
            pos = b.op("Range", [b.f32(np.float32(0)), s, b.f32(np.float32(1))])
        elif kind == "arange_i":
            pos = b.op("Cast", [b.op("Range", [b.scalar_i64(0), b.dim(x, 1), b.scalar_i64(1)])], to=TensorProto.FLOAT)
        else:  # cumsum(ones) - 1, the position ids of HF exports
            ones = b.op("ConstantOfShape", [b.dim1(x, 1)], value=helper.make_tensor("v", TensorProto.INT64, [1], [1]))
            pos = b.op("Cast", [b.op("Sub", [b.op("CumSum", [ones, b.scalar_i64(0)]), b.scalar_i64(1)])],
                       to=TensorProto.FLOAT)
        pos = b.op("Unsqueeze", [pos, b.i64([0, 2])])
        y = b.op("Add", [x, b.op("Mul", [pos, b.f32(np.float32(0.05))])])
    elif kind == "causal":  # mask from Range(S): Less/Greater -> Where -> Add to scores
        r = b.op("Range", [b.scalar_i64(0), b.dim(x, 1), b.scalar_i64(1)])
        rows = b.op("Unsqueeze", [r, b.i64([1])])
        cols = b.op("Unsqueeze", [r, b.i64([0])])
        if b.rng.integers(2):
            mask = b.op("Greater", [cols, rows])
        else:
            mask = b.op("Not", [b.op("Less", [rows, cols])])
            mask = b.op("Not", [mask])
        bias = b.op("Where", [mask, b.f32(np.float32(-1e4)), b.f32(np.float32(0))])
        scores = b.op("MatMul", [x, b.op("Transpose", [x], perm=[0, 2, 1])])
        scores = b.op("Add", [b.op("Mul", [scores, b.f32(np.float32(1 / np.sqrt(d)))]), bias])
        y = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), x])
    elif kind == "flatten":  # [N*S, D] @ W, back to [N, S, D']
        ns = b.op("Mul", [b.dim(x, 0), b.dim(x, 1)])
        flat = b.op("Reshape", [x, b.concat1([b.unsq(ns), b.i64([-1])])])
        e = int(b.rng.choice([3, 5, 8]))
        z = b.op("MatMul", [flat, b.weight([d, e])])
        back = b.concat1([b.op("Slice", [b.op("Shape", [x]), b.i64([0]), b.i64([2]), b.i64([0])]), b.i64([e])])
        y = b.op("Reshape", [z, back])
    elif kind == "numel":  # ReduceProd(Shape(x)): flatten and the element count as a value
        numel = b.op("ReduceProd", [b.op("Shape", [x])], keepdims=1)
        flat = b.op("Reshape", [x, numel])
        mean = b.op("Div", [b.op("ReduceSum", [flat, b.i64([0])], keepdims=1),
                            b.op("Cast", [numel], to=TensorProto.FLOAT)])
        y = b.op("Sub", [x, mean])
    elif kind == "tile":  # Tile(p [1, D], [S, 1]) + x
        p = b.weight([1, d], fan_in=1)
        reps = b.concat1([b.dim1(x, 1), b.i64([1])])
        y = b.op("Add", [x, b.op("Tile", [p, reps])])
    elif kind == "pad_even":  # pad S to even by Mod(S, 2), then pairs: [N, ceil(S/2), D]
        odd = b.op("Mod", [b.dim1(x, 1), b.i64([2])])
        pads = b.concat1([b.i64([0, 0, 0, 0]), odd, b.i64([0])])
        padded = b.op("Pad", [x, pads], mode="constant")
        pairs = b.op("Reshape", [padded, b.i64([0, -1, 2, d])])
        y = b.op("ReduceMean", [pairs], axes=[2], keepdims=0)
        if b.rng.integers(2):  # Max(S - 2, 1) rows of it, through Sub/Max/Div
            keep = b.op("Max", [b.op("Div", [b.op("Sub", [b.dim1(x, 1), b.i64([1])]), b.i64([2])]), b.i64([1])])
            y = b.op("Slice", [y, b.i64([0]), keep, b.i64([1])])
    elif kind == "expand_shape":  # Expand(p [D], Shape(x)) * x
        y = b.op("Mul", [x, b.op("Expand", [b.weight([d], fan_in=1), b.op("Shape", [x])])])
    else:  # Size(x) as a scale
        y = b.op("Div", [x, b.op("Cast", [b.op("Size", [x])], to=TensorProto.FLOAT)])
    return [y], 3


# ---- idioms: dims equal only at run time -----------------------------------------------------

def runtime_equal(b: Builder):
    kind = ["two_inputs", "pool_resize", "resize_sizes", "split", "space_to_depth"][b.rng.integers(5)]
    b.notes.append(kind)
    if kind == "two_inputs":  # [N,S,D] + [N,T,D], T == S at run time
        x, d = seq_input(b, S=Rule(1, 1, 20))
        t = b.input("y", ["N", "T", d])
        b.aliases["T"] = "S"
        y = b.op("Add", [x, t])
        if b.rng.integers(2):
            y = b.op("Concat", [y, b.op("Mul", [x, t])], axis=2)
        return [y], 3
    if kind == "split":  # equal halves of S: GLU
        x, d = seq_input(b, S=Rule(2, 2, 24))
        a, g = b.op("Split", [x], outputs=2, axis=1)
        return [b.op("Mul", [a, b.op("Sigmoid", [g])])], 3
    if kind == "space_to_depth":
        x, c = img_input(b, h_rule=Rule(2, 2, 16))
        z = b.op("SpaceToDepth", [x], blocksize=2)
        z = b.op("Conv", [z, b.weight([4 * c, 4 * c, 1, 1])], kernel_shape=[1, 1])
        return [b.op("Add", [b.op("DepthToSpace", [z], blocksize=2, mode="DCR"), x])], 4
    if kind == "pool_resize":  # U-Net skip: MaxPool /2 -> conv -> Resize x2 -> Add (even H, W)
        x, c = img_input(b, h_rule=Rule(2, 2, 16))
        z = conv3(b, b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2]), c, c)
        up = b.op("Resize", [z, "", b.f32(np.array([1, 1, 2, 2], np.float32))], mode="nearest",
                  coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        return [b.op("Add", [up, x])], 4
    # FPN skip: Resize to the skip's own size (any H >= 2)
    x, c = img_input(b, h_rule=Rule(2, 1, 17))
    z = conv3(b, b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2]), c, c)
    sizes = b.op("Shape", [x])
    up = b.op("Resize", [z, "", "", sizes], mode="nearest", coordinate_transformation_mode="asymmetric",
              nearest_mode="floor")
    return [b.op("Add", [up, x])], 4


# ---- idioms: SAME padding with stride, ceil_mode pooling -------------------------------------

def window(b: Builder):
    kind = ["conv_same_upper", "conv_same_lower", "maxpool_ceil", "avgpool_ceil", "maxpool_same"][b.rng.integers(5)]
    b.notes.append(kind)
    if kind.startswith("conv_same"):
        x, c = img_input(b, h_rule=Rule(1, 1, 17))
        pad = "SAME_UPPER" if kind.endswith("upper") else "SAME_LOWER"
        k = int(b.rng.choice([2, 3]))
        y = b.op("Conv", [x, b.weight([4, c, k, k])], kernel_shape=[k, k], strides=[2, 2], auto_pad=pad)
        return [y], 4
    if kind == "maxpool_same":
        x, c = img_input(b, h_rule=Rule(1, 1, 17))
        return [b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")], 4
    pads = int(b.rng.integers(2))
    x, c = img_input(b, h_rule=Rule(3 - 2 * pads, 1, 17))
    if kind == "maxpool_ceil":
        y = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, pads=[pads] * 4)
    else:
        y = b.op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, pads=[pads] * 4,
                 count_include_pad=0)
    return [conv3(b, y, c, 4)], 4


# ---- idioms: Reshape with -1 after an S+1 dim ------------------------------------------------

def reshape_heads(b: Builder):
    x, d = seq_input(b, d=int(b.rng.choice([4, 8])), S=Rule(1, 1, 16))
    heads = 2
    kind = ["vit", "merge"][b.rng.integers(2)]
    b.notes.append(kind)
    if kind == "merge":  # [N, S*D] and back
        flat = b.op("Reshape", [x, b.i64([0, -1])])
        return [b.op("Reshape", [b.op("Relu", [flat]), b.i64([0, -1, d])])], 3
    tok = b.op("Concat", [expand_idiom(b, x, d), x], axis=1)  # [N, S+1, D]
    q = b.op("MatMul", [tok, b.weight([d, d])])
    split = b.op("Transpose", [b.op("Reshape", [q, b.i64([0, -1, heads, d // heads])])], perm=[0, 2, 1, 3])
    scores = b.op("MatMul", [split, b.op("Transpose", [split], perm=[0, 1, 3, 2])])
    att = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), split])
    merged = b.op("Reshape", [b.op("Transpose", [att], perm=[0, 2, 1, 3]), b.i64([0, -1, d])])
    return [merged], 3


# ---- plain blocks: conv / matmul / softmax / reduce / transpose / concat, with broadcasting ---

def plain(b: Builder):
    if b.rng.integers(2):
        b.notes.append("cnn")
        x, c = img_input(b, h_rule=Rule(1, 1, 15))
        y = conv3(b, x, c, c)
        for _ in range(int(b.rng.integers(1, 4))):
            k = b.rng.integers(5)
            if k == 0:
                y = b.op("Add", [y, b.weight([1, c, 1, 1], fan_in=1)])
            elif k == 1:
                y = b.op("Add", [conv3(b, unary(b, y), c, c), x])
            elif k == 2:
                y = b.op("Mul", [y, b.op("ReduceMean", [y], axes=[2, 3], keepdims=1)])
            elif k == 3:
                y = b.op("Softmax", [y], axis=1)
            else:
                y = b.op("Concat", [y, x], axis=1)
                y = b.op("Conv", [y, b.weight([c, 2 * c, 1, 1])], kernel_shape=[1, 1])
        return [y], 4
    b.notes.append("seq")
    x, d = seq_input(b, S=Rule(1, 1, 24))
    y = x
    if b.rng.integers(2):  # broadcasting between two inputs: [N,S,D] * [N,1,D]
        g = b.input("g", ["N", 1, d])
        y = b.op("Mul", [y, g])
        b.notes.append("broadcast input")
    for _ in range(int(b.rng.integers(1, 4))):
        k = b.rng.integers(5)
        if k == 0:
            y = b.op("Add", [b.op("MatMul", [y, b.weight([d, d])]), b.weight([d], fan_in=1)])
        elif k == 1:
            y = b.op("Softmax", [y], axis=int(b.rng.choice([1, 2])))
        elif k == 2:
            y = b.op("Sub", [y, b.op("ReduceMean", [y], axes=[-1], keepdims=1)])
        elif k == 3:
            y = b.op("Transpose", [b.op("Relu", [b.op("Transpose", [y], perm=[0, 2, 1])])], perm=[0, 2, 1])
        else:
            y = b.op("MatMul", [b.op("Concat", [y, x], axis=2), b.weight([2 * d, d])])
    return [y], 3


IDIOMS = [
    ("slice", slice_of_dim, 3),
    ("shape-value", shape_value, 4),
    ("runtime-equal", runtime_equal, 3),
    ("window", window, 2),
    ("reshape", reshape_heads, 2),
    ("plain", plain, 2),
]


def _sizes(rule: Rule, rng: np.random.Generator, which: int) -> int:
    def legal(v):
        v = max(v, rule.low)
        return -(-v // rule.mult) * rule.mult
    if which == 0:
        return legal(1)
    if which == 1:  # odd (or an odd multiple of mult)
        return legal(rule.mult * int(rng.choice([3, 5, 7])))
    if which == 2:
        return legal(int(rng.integers(max(rule.high // 2, 2), rule.high + 1)))
    return legal(int(rng.integers(2, max(rule.high // 2, 3))))


def make_case(seed: int, index: int, wrap: bool = True) -> Case:
    """Graph `index` of the run with `seed`. `wrap=False` leaves out the blocks around the idiom
    (what a minimizer tries first)."""
    rng = np.random.default_rng([seed, index])
    weights = np.array([w for _, _, w in IDIOMS], dtype=np.float64)
    cls, fn, _ = IDIOMS[int(rng.choice(len(IDIOMS), p=weights / weights.sum()))]
    b = Builder(rng)
    outputs, rank = fn(b)
    wrap_rng = np.random.default_rng([seed, index, 1])
    if wrap:
        b.rng = wrap_rng
        # before the idiom: a pointwise block on the first input, spliced in by renaming its uses
        if wrap_rng.integers(2):
            first = b.inputs[0][0]
            pre = pointwise(b, first, len(b.inputs[0][1]))
            pre_node = b.nodes.pop()
            for node in b.nodes:
                for i, name in enumerate(node.input):
                    if name == first:
                        node.input[i] = pre
            b.nodes.insert(0, pre_node)
            b.notes.append("pre " + pre_node.op_type)
        for _ in range(int(wrap_rng.integers(0, 3))):
            outputs = [post_block(b, y, rank) for y in outputs]
            b.notes.append("post " + b.nodes[-1].op_type)
    idiom = b.notes[0] if b.notes else fn.__name__
    name = f"g{seed}_{index:05d}_{cls}_{idiom}".replace("-", "_")
    graph_outputs = []
    for k, y in enumerate(outputs):
        out = f"out{k}"
        b.nodes.append(helper.make_node("Identity", [y], [out], name=b.fresh("Identity")))
        graph_outputs.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, [None] * rank))
    graph_inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n, dims in b.inputs]
    graph = helper.make_graph(b.nodes, name, graph_inputs, graph_outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="kiln-shape-fuzz")
    model.ir_version = 8
    size_rng = np.random.default_rng([seed, index, 2])
    size_sets = []
    for which in range(4):
        sizes = {}
        for sym, rule in sorted(b.rules.items()):
            if sym not in b.aliases:
                sizes[sym] = _sizes(rule, size_rng, which)
        while sizes in size_sets and sizes:  # four distinct sets: bump the first symbol
            first = next(iter(sizes))
            sizes[first] += b.rules[first].mult
        for sym, other in b.aliases.items():
            sizes[sym] = sizes[other]
        size_sets.append(sizes)
    return Case(name=name, idiom=idiom, cls=cls, model=model.SerializeToString(), size_sets=size_sets,
                inputs=b.inputs, description=", ".join(b.notes))


def plants_nan(seed: int, index: int, fraction: float) -> bool:
    """Whether graph `index` gets a NaN in its first input (`--plant-nan fraction`)."""
    return fraction > 0 and np.random.default_rng([seed, index, 4]).random() < fraction


def input_arrays(case: Case, set_index: int, seed: int, index: int, nan: bool = False) -> list:
    """The inputs of size set `set_index`: uniform in [-1, 1), f32, deterministic. With `nan`, one
    element of the first input (at a seeded place) is NaN."""
    rng = np.random.default_rng([seed, index, 3, set_index])
    sizes = case.size_sets[set_index]
    out = []
    for name, dims in case.inputs:
        shape = [sizes[d] if isinstance(d, str) else d for d in dims]
        out.append((name, rng.uniform(-1, 1, size=shape).astype(np.float32)))
    if nan and out and out[0][1].size:
        out[0][1].reshape(-1)[rng.integers(out[0][1].size)] = np.nan
    return out
