// Shared by every kiln compute shader. Buffers are reached by device address (buffer references
// in the push constants, kernel_builder.h): no descriptor sets, no storage-buffer range limit.
#extension GL_EXT_buffer_reference : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32 { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32 { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer U64 { uvec2 v[]; };

// The 1-D kernels: one invocation per element, at most maxComputeWorkGroupCount[0] workgroups per
// launch; KernelBuilder::launch splits a larger range into launches whose first parameter (`base`,
// the first element of the launch) says where each starts. Neither a 2-D grid nor a grid-stride
// loop is used: lavapipe (Mesa 22.3) computes wrong invocation ids for rows past the first of a
// 65535-wide grid, and runs a loop around the element 60x slower than one element per invocation.
uint element_index(uint base) { return base + gl_GlobalInvocationID.x; }

// kiln's fused activation (kernels/activation.h): 0 none, 1 relu, 2 clip(lo, hi), 3 leaky relu
// (alpha in lo), 4 silu (v * sigmoid(v), the sigmoid split by sign as unary.comp's). NaN stays
// NaN: the comparisons are false for it, and silu multiplies by it.
float fused_activation(float v, uint kind, float lo, float hi) {
  if (kind == 1u) return v < 0.0 ? 0.0 : v;
  if (kind == 2u) {
    if (v < lo) return lo;
    if (v > hi) return hi;
  }
  if (kind == 3u) return v < 0.0 ? lo * v : v;  // leaky relu: lo holds alpha
  if (kind == 4u) {
    if (v >= 0.0) return v * (1.0 / (1.0 + exp(-v)));
    float e = exp(v);
    return v * (e / (1.0 + e));
  }
  if (kind == 5u) {  // mish: tanh of a softplus above 9 is 1 in f32 (and inf / inf in some tanh)
    float softplus = (v > 0.0 ? v : 0.0) + log(1.0 + exp(-abs(v)));
    return v * (softplus > 9.0 ? 1.0 : tanh(softplus));
  }
  return v;
}
