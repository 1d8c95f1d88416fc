"""Expected values for normalization_test, linear_test and softmax_test
(run: /usr/bin/python3 misc_cases.py)."""
import numpy as np
from reference import pattern, show

# BatchNormalization, spatial = 1
x = pattern(2 * 3 * 2 * 2, 7, 3, 11, 4).reshape(2, 3, 2, 2)
scale = np.array([0.5, -1.5, 2.0])
bias = np.array([0.25, 0.0, -1.0])
mean = np.array([0.1, -0.2, 0.3])
var = np.array([0.5, 1.0, 2.0])
eps = 1e-3
c = lambda a: a.reshape(1, 3, 1, 1)
show("bn_spatial1", (x - c(mean)) / np.sqrt(c(var) + eps) * c(scale) + c(bias))
show("bn_spatial1_relu", np.maximum((x - c(mean)) / np.sqrt(c(var) + eps) * c(scale) + c(bias), 0))
# spatial = 0: parameters of shape X.shape[1:] = [3, 2, 2]
p = lambda n, m: pattern(12, m, n, 7, 4).reshape(3, 2, 2)
s0, b0, m0 = p(1, 3), p(2, 5), p(3, 2)
v0 = np.abs(p(0, 3)) + 0.5
show("bn_spatial0", (x - m0) / np.sqrt(v0 + 1e-5) * s0 + b0)
print("// v0", v0.reshape(-1).tolist())

# Gemm: A [3,4] (transA -> stored [4,3]), B [5,4] (transB), C [5] row vector
a = pattern(12, 5, 1, 7, 2).reshape(4, 3)
b = pattern(20, 3, 2, 9, 4).reshape(5, 4)
cc = np.array([1.0, -1.0, 0.5, 0.0, 2.0])
show("gemm_trans", 0.5 * (a.T @ b.T) + 2.0 * cc)
a2 = pattern(6, 1, 0, 5, 1).reshape(2, 3)
b2 = pattern(12, 1, 0, 7, 1).reshape(3, 4)
c2 = np.array([[10.0], [20.0]])
show("gemm_plain_colbias", a2 @ b2 + c2)
show("gemm_nobias", a2 @ b2)

# MatMul
a = pattern(2 * 1 * 2 * 3, 5, 1, 7, 2).reshape(2, 1, 2, 3)
b = pattern(3 * 3 * 2, 3, 2, 9, 4).reshape(3, 3, 2)
show("matmul_batch", a @ b)
v = np.array([1.0, -2.0, 0.5])
m = pattern(12, 1, 0, 7, 1).reshape(3, 4)
show("matmul_vec_mat", v @ m)
show("matmul_mat_vec", m.T @ v)
show("matmul_vec_vec", v @ v)
bt = pattern(2 * 3 * 4, 7, 1, 11, 3).reshape(2, 3, 4)
show("matmul_vec_batch", v @ bt)

# Softmax
x = pattern(2 * 3 * 4, 7, 3, 11, 2).reshape(2, 3, 4)
def softmax(z, axis):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
show("softmax_last", softmax(x, -1))
show("softmax_axis0", softmax(x, 0))
show("softmax_v1_axis1", softmax(x.reshape(2, 12), 1))
show("softmax_large", softmax(np.array([[1000.0, 1001.0, 1002.0], [-1e4, 0.0, 1e4]]), -1))
