#pragma once
// main() of the MPI benchmarks that run one deck:
//   mpirun -n P NAME DECK [key=value ...]
// MPI and Kokkos start as in kpipe itself (runtime::Environment: subnormals
// flushed, Open MPI's eager limit), `run` gets the deck's RunConfig, and rank
// 0 prints its JSON on stdout; a bad deck or override is one line on stderr
// and the input error's exit code.

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kpipe/config/from_deck.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/runtime/environment.hpp"

template <class Run>
int deck_benchmark_main(int argc, char** argv, const char* name, Run&& run) {
  const kpipe::runtime::Environment env(argc, argv);
  try {
    if (argc < 2) throw kpipe::input_error(std::string("usage: ") + name + " DECK [key=value ...]");
    const std::vector<std::string> overrides(argv + 2, argv + argc);
    const std::string text = kpipe::config::read_deck_file(argv[1]);
    const nlohmann::json result = run(kpipe::config::run_config(kpipe::config::parse_deck(text, argv[1], overrides)));
    if (env.rank() == 0) std::cout << result.dump(2) << std::endl;
    return 0;
  } catch (const kpipe::Error& e) {
    if (env.rank() == 0) std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return e.exit_code();
  }
}
