#include "kiln/kernels/families.h"

namespace kiln::kernels {

void register_movement_kernels(std::vector<OpKernel>& table) {}

}  // namespace kiln::kernels
