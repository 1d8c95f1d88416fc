// Numpy broadcasting (broadcast.h): the index of an operand whose element strides over the
// output's dims are `strides` (0 along broadcast dims), for output element i of dims[0..rank).
uint broadcast_index(uint i, uint rank, uint dims[6], uint strides[6]) {
  uint index = 0u;
  uint rest = i;
  for (int d = int(rank) - 1; d >= 0; --d) {
    index += (rest % dims[d]) * strides[d];
    rest /= dims[d];
  }
  return index;
}
