// Small modules compiled in memory for the runtime's tests (Session: threads, run_into, output
// shapes). Each is built as an IR graph, inferred and compiled by kiln's own compiler, so the
// dispatches are the ones a user's model would get.
#pragma once

#include <memory>

#include "kiln/module/module.h"

namespace kiln::testing {

// x[N,3,32,32] -> Conv 3x3 pad 1 (3->8, bias) -> Relu -> Conv 3x3 pad 1 (8->8) -> Add(conv2, relu)
// = "features" [N,8,32,32] -> GlobalAveragePool = "pooled" [N,8,1,1]. Outputs: pooled, features.
// Both convolutions are large enough for the CPU to run them on all of a session's threads.
std::shared_ptr<const module::ModuleContents> compile_batch_conv_module();

// x[6] f32 -> NonZero(Greater(x, 0)) = "nz" i64 [1,P] -> Add(nz, nz) = "doubled" [1,P], where P
// is a data symbol. Outputs: doubled, then "mask" bool [6] (its dims known from the inputs).
std::shared_ptr<const module::ModuleContents> compile_nonzero_module();

}  // namespace kiln::testing
