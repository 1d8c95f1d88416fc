#include "kiln/kernels/families.h"

namespace kiln::kernels {

void register_resize_kernels(std::vector<OpKernel>& table) {}

}  // namespace kiln::kernels
