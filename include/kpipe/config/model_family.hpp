#pragma once
// The registry of model families (model.kind): the one place that knows what
// a family is. A family names itself, declares its deck keys (a fragment of
// the schema), reads and checks them, and plans its partitionable layers as
// registered layer kinds with their widths, so the deck, the partition, the
// runtime and the commands need no switch over families. kpipe's own
// families register through the same call as a project's
// (docs/architecture.md, "Adding a model family").

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kpipe/config/schema.hpp"

namespace kpipe::config {

class Deck;
struct ModelConfig;

// One partitionable layer of a family's plan: the registered layer kind that
// builds it (model::layer_kind resolves the name) and its widths per sample.
struct PlannedLayer {
  std::string kind;
  int input_dim = 0;
  int output_dim = 0;
  // The deck key that chose the kind ("model.block"), for messages; empty
  // when the family chose it.
  std::string chosen_by = {};
};

// A width tensor parallelism splits across the t ranks of a stage, and what
// a message calls it ("model.heads"). t divides it, or, where `shareable`,
// t may be a multiple of it: each of its parts is then shared by t / width
// ranks (grouped-query attention's key/value heads).
struct SplitWidth {
  std::string what;
  int width = 0;
  bool shareable = false;
};

struct ModelFamily {
  std::string name;  // as model.kind names it
  std::string doc;   // a phrase for model.kind's doc: "a plain MLP"
  // Its deck keys, each "model.<name>"; a key several families read (the
  // transformer keys of a language model) is declared alike by each.
  std::vector<KeySpec> keys;
  // Samples are sequences of model.context token ids with a next-token
  // prediction at each position (token data, a vocabulary-parallel LM head,
  // sequence parallelism, serving); otherwise feature vectors of
  // model.input_dim with model.output_dim targets.
  bool token_sequences = false;
  // The layer kind of its repeated block when model.block is empty; empty
  // for a family without one (model.block is then refused).
  std::string block;
  // Reads its typed fields from the deck into `model` and checks them; input
  // errors name the key (Deck::describe). Optional: every key's value is in
  // ModelConfig::values before it runs.
  std::function<void(const Deck& deck, ModelConfig& model)> read;
  // Its partitionable layers, first to last; an input error for a shape it
  // cannot build (a spec assembled in code gets the deck's checks here).
  std::function<std::vector<PlannedLayer>(const ModelConfig& model)> layers;
  // The widths the t ranks of a stage split; each must be divisible by t.
  std::function<std::vector<SplitWidth>(const ModelConfig& model)> split_widths;
};

// Adds a family, at start-up, before any deck is read. An input error when
// its name is empty or taken, `layers` or `split_widths` is missing, or a key
// is outside model.*, a built-in key, or declared otherwise by another
// family. The reference stays valid for the process's life.
const ModelFamily& register_model_family(ModelFamily family);
// The family named `name`; an input error listing the registered families,
// which starts with `key` (the deck key that named it) when one is given.
const ModelFamily& model_family(std::string_view name, std::string_view key = {});
// Every registered family, built-ins first, in registration order.
std::vector<std::string> model_family_names();
// Every key the registered families declare, each once, in registration
// order (the schema lists them after the keys every family reads).
std::vector<KeySpec> model_family_keys();
// The names of the families whose `token_sequences` holds, quoted and joined
// with "or": what a message asks a deck to choose.
std::string token_family_choices();

}  // namespace kpipe::config
