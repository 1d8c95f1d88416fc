#include "kiln/kernels/families.h"

namespace kiln::kernels {

void register_normalize_kernels(std::vector<OpKernel>& table) {}

}  // namespace kiln::kernels
