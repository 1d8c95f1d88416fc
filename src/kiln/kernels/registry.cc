#include "kiln/kernels/families.h"

namespace kiln::kernels {

void register_all(std::vector<OpDef>& table) {
  register_unary_kernels(table);
  register_cast_kernels(table);
  register_binary_kernels(table);
  register_reduce_kernels(table);
  register_normalize_kernels(table);
  register_scan_kernels(table);
  register_movement_kernels(table);
  register_index_kernels(table);
  register_scatter_kernels(table);
  register_generate_kernels(table);
  register_select_kernels(table);
  register_resize_kernels(table);
  register_spatial_kernels(table);
  register_sampling_kernels(table);
  register_unpool_kernels(table);
  register_detection_kernels(table);
  register_linalg_kernels(table);
  register_recurrent_kernels(table);
  register_signal_kernels(table);
  register_loss_kernels(table);
  register_quantize_kernels(table);
  register_text_kernels(table);
  register_training_kernels(table);
}

}  // namespace kiln::kernels
