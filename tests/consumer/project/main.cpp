// A program outside the kpipe tree that trains through its installed headers
// and libraries: a deck's model on one rank, ten steps, and the loss must fall.
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdio>

#include "kpipe/config/from_deck.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/tensor/compat.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  kpipe::tensor::compat::initialize(argc, argv);
  int code = 0;
  {
    const auto deck = kpipe::config::parse_deck(
        "model.hidden = [32, 32]\ntrain.global_batch = 64\ntrain.microbatch_size = 16\npipeline.stages = 1\n",
        "consumer.toml");
    const auto config = kpipe::config::run_config(deck);
    kpipe::runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, kpipe::runtime::Mode::train);
    const double first = pipeline.run_step(0).loss;
    double last = first;
    for (int step = 1; step < 10; ++step) last = pipeline.run_step(step).loss;
    std::printf("consumer: m = %d microbatches, loss %.4f after one step, %.4f after ten\n", pipeline.schedule().m,
                first, last);
    code = last < first ? 0 : 1;
  }
  Kokkos::finalize();
  MPI_Finalize();
  return code;
}
