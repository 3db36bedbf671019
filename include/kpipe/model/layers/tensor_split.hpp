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
//
// replicated: W whole on every rank, whose consumer uses only part of the
// outputs, so the output gradient is partial: like a column-parallel
// Linear, the input gradient is summed over the group in B (and the rows
// gathered with sequence parallelism), and W's gradient is summed over the
// group before the optimizer (a row partial). Grouped-query attention's
// projection with more tensor ranks than key/value heads, each key/value
// head shared by t / kv_heads ranks, is one.
enum class TensorSplit { none, column, row, replicated };

}  // namespace kpipe::model
