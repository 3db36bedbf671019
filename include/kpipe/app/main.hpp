#pragma once
// kpipe's command line as a function, so that a project's own executable can
// register what it brings (layer kinds, schedules) and hand over: its decks
// then name them, and run, plan, sweep, checkpoints and profiles all work
// for its model (docs/architecture.md, "Extending kpipe from your own
// project"; examples/custom_model/ is the worked example):
//
//   int main(int argc, char** argv) {
//     kpipe::model::register_layer_kind(my::swiglu_kind());
//     kpipe::schedule::register_schedule(my::schedule_info());
//     return kpipe::main(argc, argv);
//   }
//
// Initialises and finalises MPI and Kokkos itself; returns the process's exit
// code (0 success, 2 bad input, 1 runtime failure) after printing any error
// as one line.

namespace kpipe {

int main(int argc, char** argv);

}  // namespace kpipe
