// The operator domains kiln reads and writes besides the default one: ai.onnx.preview.training
// version 1, for the optimizers kiln defines there (kernels/training.cc). kiln's IR knows ops by
// name alone, so the importer accepts these names only in this domain and the exporter writes
// them back into it.
#pragma once

#include <algorithm>
#include <iterator>
#include <string_view>

namespace kiln::onnx_import {

inline constexpr std::string_view kTrainingDomain = "ai.onnx.preview.training";
inline constexpr int64_t kTrainingDomainVersion = 1;
inline constexpr std::string_view kTrainingOps[] = {"Adagrad", "Adam", "Momentum"};

inline bool is_training_op(std::string_view op_type) {
  return std::find(std::begin(kTrainingOps), std::end(kTrainingOps), op_type) !=
         std::end(kTrainingOps);
}

}  // namespace kiln::onnx_import
