"""Expected values for conv_test.cc (run: /usr/bin/python3 conv_cases.py)."""
import numpy as np
from reference import pattern, conv, same_pads, show

# GroupedDilatedStridedWithBias
x = pattern(240, 7, 3, 11, 4).reshape(2, 4, 5, 6)
w = pattern(48, 5, 1, 7, 3).reshape(4, 2, 3, 2)
b = np.array([0.5, -1, 0.25, 2])
show("grouped", conv(x, w, b, strides=[1, 2], pads=[1, 0, 2, 1], dilations=[2, 1], group=2))

# OneD
x = pattern(14, 3, 1, 5, 2).reshape(1, 2, 7)
w = pattern(18, 5, 2, 9, 4).reshape(3, 2, 3)
show("1d", conv(x, w, strides=[2], pads=[1, 1]))

# ThreeD
x = pattern(96, 5, 2, 13, 4).reshape(1, 2, 4, 4, 3)
w = pattern(48, 3, 1, 7, 2).reshape(2, 2, 2, 3, 2)
show("3d", conv(x, w, strides=[2, 1, 1], pads=[1, 0, 1, 0, 1, 0]))

# AutoPad
x = np.arange(25, dtype=np.float64).reshape(1, 1, 5, 5)
w = np.ones((1, 1, 3, 3))
for upper in (True, False):
    p = same_pads([5, 5], [3, 3], [2, 2], [1, 1], upper)
    print("// pads", p)
    show("same_upper" if upper else "same_lower", conv(x, w, strides=[2, 2], pads=p))
x = pattern(36, 5, 0, 7, 2).reshape(1, 1, 6, 6)
w = pattern(4, 1, 0, 4, 1).reshape(1, 1, 2, 2)
for upper in (True, False):
    p = same_pads([6, 6], [2, 2], [1, 1], [1, 1], upper)
    print("// pads", p)
    show("even_kernel_upper" if upper else "even_kernel_lower", conv(x, w, pads=p))
show("valid", conv(pattern(36, 5, 0, 7, 2).reshape(1, 1, 6, 6), np.ones((1, 1, 3, 3)), strides=[2, 2]))
