"""Expected values for pooling_test.cc (run: /usr/bin/python3 pooling_cases.py)."""
import numpy as np
from reference import pattern, pool, same_pads, show

x = pattern(2 * 3 * 5 * 5, 7, 3, 23, 4).reshape(2, 3, 5, 5)
show("max_pads_strides", pool(x, [3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
show("max_ceil", pool(x, [2, 2], strides=[2, 2], ceil_mode=True))
show("max_dilations", pool(x, [2, 2], dilations=[2, 2]))
p = same_pads([5, 5], [2, 2], [2, 2], [1, 1], True)
print("// same_upper pads", p)
show("max_same_upper", pool(x, [2, 2], strides=[2, 2], pads=p))
p = same_pads([5, 5], [2, 2], [2, 2], [1, 1], False)
print("// same_lower pads", p)
show("avg_same_lower", pool(x, [2, 2], strides=[2, 2], pads=p, mode="avg"))
show("avg_pads_exclude", pool(x, [3, 3], strides=[2, 2], pads=[1, 1, 1, 1], mode="avg"))
show("avg_pads_include", pool(x, [3, 3], strides=[2, 2], pads=[1, 1, 1, 1], mode="avg",
                              count_include_pad=True))
show("avg_ceil_include", pool(x, [3, 3], strides=[2, 2], pads=[1, 1, 0, 0], ceil_mode=True,
                              mode="avg", count_include_pad=True))
x1 = pattern(2 * 9, 5, 1, 7, 2).reshape(1, 2, 9)
show("max_1d", pool(x1, [3], strides=[2], pads=[1, 0]))
x3 = pattern(2 * 4 * 4 * 3, 5, 2, 13, 4).reshape(1, 2, 4, 4, 3)
show("avg_3d", pool(x3, [2, 2, 2], strides=[2, 2, 1], mode="avg"))
show("global_avg", x.mean(axis=(2, 3), keepdims=True))
