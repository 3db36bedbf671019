#pragma once
// The registry of data sources: what `data.source` names. A source kind says
// what data.path must hold (if it reads one), which models it can feed, and
// builds a model::DataSource for a split. kpipe's own sources (synthetic,
// hdf5, text) register through the same call as a project's
// (docs/architecture.md, "Extending kpipe from your own project"), so a deck
// names a project's source exactly as it names kpipe's.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/io/dataset.hpp"
#include "kpipe/model/data/data_source.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/tensor/exec_context.hpp"

namespace kpipe::runtime {

// What a source kind's factory builds from. The source must be a pure
// function of (step, position) (model/data/data_source.hpp), the same on every
// rank, so that any rank can fill any microbatch.
struct DataBuild {
  const config::DataConfig& data;  // data.path, data.seed, data.task as the deck gave them
  const model::TrainerSpec& spec;  // the model's shapes, the batch and the data seed it trains with
  io::Split split;                 // train for training, test for validation and inference
  tensor::ExecContext& exec;
};

template <class Scalar>
using DataFactory = std::function<std::unique_ptr<model::DataSource<Scalar>>(const DataBuild&)>;

struct DataSourceKind {
  std::string name;  // as data.source names it
  // What data.path must name ("HDF5 dataset"); empty when the source reads no file.
  std::string path_holds;
  // Refuses a model the source cannot feed with an input error naming the
  // keys to change; runs before any data is read (kpipe deck and plan run it
  // too). Optional.
  std::function<void(const config::DataConfig& data, const model::TrainerSpec& spec)> check;
  DataFactory<float> make_float;
  DataFactory<double> make_double;

  template <class Scalar>
  std::unique_ptr<model::DataSource<Scalar>> make(const DataBuild& build) const {
    if constexpr (std::is_same_v<Scalar, float>) {
      return make_float(build);
    } else {
      return make_double(build);
    }
  }
};

// Both factories of a kind from one generic callable
// `make(Scalar{}, const DataBuild&) -> std::unique_ptr<model::DataSource<Scalar>>`.
template <class Make>
void set_factories(DataSourceKind& kind, Make make) {
  kind.make_float = [make](const DataBuild& build) { return make(float{}, build); };
  kind.make_double = [make](const DataBuild& build) { return make(double{}, build); };
}

// Adds a kind, at start-up, before any deck is read. An input error when the
// name is empty or taken or a factory is missing. The reference stays valid
// for the process's life.
const DataSourceKind& register_data_source(DataSourceKind kind);
// The kind data.source = `name` names; an input error listing the registered
// kinds otherwise.
const DataSourceKind& data_source_kind(const std::string& name);
// Every registered kind's name, built-ins first, in registration order.
std::vector<std::string> data_source_names();

// Everything about `data` that can be checked before any data is read: the
// kind exists, data.path is given when the kind reads one, and the kind can
// feed the model of `spec`. Returns the kind.
const DataSourceKind& check_data_source(const config::DataConfig& data, const model::TrainerSpec& spec);

// The source config.data names, for `split`, built by its kind.
template <class Scalar>
std::unique_ptr<model::DataSource<Scalar>> make_data_source(const config::DataConfig& data,
                                                            const model::TrainerSpec& spec, io::Split split,
                                                            tensor::ExecContext& exec);

}  // namespace kpipe::runtime
