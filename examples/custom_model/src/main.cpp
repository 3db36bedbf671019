// kpipe with this project's SwiGLU block and model family, schedule and CSV
// data source:
// register, then hand over to kpipe's command line (run, plan, sweep, deck, ...).
#include "kpipe/app/main.hpp"
#include "csv_source.hpp"
#include "kpipe/model/layer_kind.hpp"
#include "kpipe/runtime/data/data_source_kind.hpp"
#include "kpipe/schedule/registry.hpp"
#include "reserve_schedule.hpp"
#include "swiglu.hpp"
#include "swiglu_family.hpp"

int main(int argc, char** argv) {
  kpipe::model::register_layer_kind(custom::swiglu_block_kind());
  kpipe::config::register_model_family(custom::swiglu_mlp_family());
  kpipe::schedule::register_schedule(custom::reserve_schedule_info());
  kpipe::runtime::register_data_source(custom::csv_source_kind());
  return kpipe::main(argc, argv);
}
