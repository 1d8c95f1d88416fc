#include "kiln/kernels/families.h"

namespace kiln::kernels {

void register_cast_kernels(std::vector<OpKernel>& table) {}

}  // namespace kiln::kernels
