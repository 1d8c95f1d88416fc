#include "kiln/kernels/families.h"

namespace kiln::kernels {

void register_index_kernels(std::vector<OpKernel>& table) {}

}  // namespace kiln::kernels
