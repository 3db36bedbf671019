// main() for the unit tests that need no MPI and no Kokkos.
#define CATCH_CONFIG_RUNNER
#include "catch.hpp"
#include "skip.hpp"

int main(int argc, char** argv) { return kpipe::test::exit_code(Catch::Session().run(argc, argv)); }
