#pragma once
// How a Linear is split across its tensor-parallel group (Megatron-LM).

namespace kpipe::model {

// Whole on every rank; column-parallel (W and b split along the outputs: the
// input is whole, the output the rank's slice of columns; the input
// gradient's partial products are summed over the group); or row-parallel
// (W split along the inputs: the input is the rank's slice, the partial
// products are summed over the group in F and b is added once after the sum;
// the input gradient is the rank's slice). A column-parallel Linear followed
// by a row-parallel one needs one sum each way and keeps whole tensors
// outside the pair.
enum class TensorSplit { none, column, row };

}  // namespace kpipe::model
