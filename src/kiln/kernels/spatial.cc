#include "kiln/kernels/families.h"

namespace kiln::kernels {

void register_spatial_kernels(std::vector<OpKernel>& table) {}

}  // namespace kiln::kernels
