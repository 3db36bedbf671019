#pragma once
// The collectives a layer may need, as an interface the runtime implements
// over its communicators (comm), so that the model depends on neither comm
// nor MPI (DESIGN.md §2). The sequential reference uses SerialCollectives:
// every group has one rank.

#include "kpipe/tensor/exec_context.hpp"
#include "kpipe/tensor/tensor.hpp"

namespace kpipe::model {

// The groups of the process grid a layer can talk to (DESIGN.md §4).
enum class Group { tensor, data };

class Collectives {
 public:
  virtual ~Collectives() = default;

  virtual int size(Group group) const = 0;
  virtual int rank(Group group) const = 0;
  // buffer = the sum of every rank's buffer, in rank order on every rank, so
  // all ranks get bitwise the same sum.
  virtual void all_reduce_sum(Group group, const tensor::Tensor& buffer) = 0;
  // gathered = every rank's `local` stacked along axis 0 in rank order;
  // gathered has size(group) times local's extent 0.
  virtual void all_gather(Group group, const tensor::Tensor& local, const tensor::Tensor& gathered) = 0;
  // local = rows [r·n/t, (r+1)·n/t) of the rank-order sum of every rank's
  // `whole` (n rows, t = size(group), r = rank(group)): bitwise those rows of
  // all_reduce_sum. `whole` is scratch (it may be overwritten). Sequence
  // parallelism's sum that leaves each rank its own rows.
  virtual void reduce_scatter_sum(Group group, const tensor::Tensor& whole, const tensor::Tensor& local) = 0;
};

// One rank per group: the sum is the buffer itself, the gather and the
// reduce-scatter a copy, queued on the context's instance.
class SerialCollectives final : public Collectives {
 public:
  explicit SerialCollectives(tensor::ExecContext& exec) : exec_(exec) {}

  int size(Group) const override { return 1; }
  int rank(Group) const override { return 0; }
  void all_reduce_sum(Group, const tensor::Tensor&) override {}
  void all_gather(Group group, const tensor::Tensor& local, const tensor::Tensor& gathered) override;
  void reduce_scatter_sum(Group group, const tensor::Tensor& whole, const tensor::Tensor& local) override;

 private:
  tensor::ExecContext& exec_;
};

}  // namespace kpipe::model
