// The model-family registry: a project's family reaches the deck like kpipe's
// own (its key in the schema and its docs, range-checked, read into the
// model section, its plan the layer count, its widths split by t), and an
// incomplete or clashing family is refused at registration.
#include "catch.hpp"
#include "kpipe/config/deck.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/config/keys.hpp"
#include "kpipe/config/model_family.hpp"
#include "kpipe/core/error.hpp"

using namespace kpipe;
using config::ModelConfig;
using config::ModelFamily;
using config::PlannedLayer;

namespace {

// "stack": model.stack_depth linear layers of model.input_dim, then the output layer.
ModelFamily stack_family(std::string name) {
  ModelFamily family;
  family.name = std::move(name);
  family.doc = "a stack of equal Linear layers";
  family.keys = {config::keys::integer("model.stack_depth", 3, 1, 64, "stack: Linear layers before the output")};
  family.read = [](const config::Deck& deck, ModelConfig& model) {
    model.input_dim = static_cast<int>(deck.integer("model.input_dim"));
    model.output_dim = static_cast<int>(deck.integer("model.output_dim"));
  };
  family.layers = [](const ModelConfig& model) {
    std::vector<PlannedLayer> layers(static_cast<std::size_t>(model.integer("model.stack_depth")),
                                     PlannedLayer{"linear", model.input_dim, model.input_dim});
    layers.push_back({"linear", model.input_dim, model.output_dim});
    return layers;
  };
  family.split_widths = [](const ModelConfig& model) -> std::vector<config::SplitWidth> {
    return {{"model.input_dim", model.input_dim}};
  };
  return family;
}

const ModelFamily& stack() {
  static const ModelFamily& family = config::register_model_family(stack_family("stack"));
  return family;
}

config::RunConfig run_config(const std::string& text) {
  return config::run_config(config::parse_deck(text, "deck.toml"));
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.kind() == ErrorKind::input ? e.what() : std::string("not an input error: ") + e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a project's model family reads its own deck key and plans its layers", "[config][family]") {
  REQUIRE(stack().name == "stack");
  const config::KeySpec* key = config::find_key("model.stack_depth");
  REQUIRE(key != nullptr);
  CHECK(config::schema_markdown().find("| `model.stack_depth` | an integer | `3` | >= 1 and <= 64 |") !=
        std::string::npos);
  CHECK(config::find_key("model.kind")->choices.back() == "stack");

  const auto run = run_config("model.kind = \"stack\"\nmodel.stack_depth = 5\nmodel.input_dim = 16\n");
  CHECK(run.model.kind == "stack");
  CHECK(run.model.integer("model.stack_depth") == 5);
  CHECK(run.layers == 6);  // five of the stack, and the output layer
  CHECK(run.model.input_dim == 16);
  CHECK_FALSE(run.model.token_sequences());

  CHECK_THAT(error_of([] { run_config("model.kind = \"stack\"\nmodel.stack_depth = 0\n"); }),
             Catch::Contains("model.stack_depth = 0 is out of range: must be >= 1 and <= 64"));
  CHECK_THAT(
      error_of([] { run_config("model.kind = \"stack\"\nmodel.input_dim = 6\npipeline.tensor_parallel = 4\n"); }),
      Catch::Contains("does not divide model.input_dim = 6"));
  CHECK_THAT(error_of([] { run_config("model.kind = \"stack\"\nmodel.block = \"residual_block\"\n"); }),
             Catch::Contains("the stack family has no repeated block; use model.kind = \"residual_mlp\", "
                             "\"transformer\" or \"llama\""));
  // Another family's deck has no value of the key.
  CHECK_THAT(error_of([] { run_config("model.kind = \"mlp\"\n").model.integer("model.stack_depth"); }),
             Catch::Contains("model.stack_depth is not a key of model.kind = \"mlp\""));
}

TEST_CASE("the built-in families plan the layer counts of their decks", "[config][family]") {
  CHECK(config::model_family_names().at(0) == "mlp");
  CHECK(run_config("model.hidden = [4, 5, 6]\n").layers == 4);
  CHECK(run_config("model.kind = \"residual_mlp\"\nmodel.hidden = [8, 8]\n").layers == 4);
  const auto lm = run_config(
      "model.kind = \"transformer\"\nmodel.vocab = 50\nmodel.layers = 3\ndata.source = \"synthetic\"\n"
      "train.global_batch = 8\ntrain.microbatch_size = 2\n");
  CHECK(lm.layers == 5);  // embedding, three blocks, LM head
  CHECK(lm.model.token_sequences());
  CHECK(lm.model.input_dim == 64);
  CHECK(lm.model.output_dim == 64 * 128);  // T rows of the vocabulary padded to 128
  CHECK(config::token_family_choices() == "\"transformer\" or \"llama\"");
  const auto llama = run_config(
      "model.kind = \"llama\"\nmodel.vocab = 50\nmodel.layers = 2\nmodel.heads = 4\nmodel.kv_heads = 0\n"
      "data.source = \"synthetic\"\ntrain.global_batch = 8\ntrain.microbatch_size = 2\n");
  CHECK(llama.layers == 4);  // token embedding, two blocks, head
  CHECK(llama.model.token_sequences());
  CHECK(llama.model.integer("model.kv_heads") == 4);  // 0 reads as model.heads
}

TEST_CASE("an incomplete or clashing model family is refused at registration", "[config][family]") {
  stack();
  CHECK_THAT(error_of([] { config::register_model_family(stack_family("mlp")); }),
             Catch::Contains("model family \"mlp\" is registered twice"));
  ModelFamily outside = stack_family("outside");
  outside.keys.push_back(config::keys::integer("train.depth", 1, 1, 4, "a key outside model.*"));
  CHECK_THAT(error_of([&] { config::register_model_family(outside); }),
             Catch::Contains("declares the key \"train.depth\"; a family's keys are model.<name>"));
  ModelFamily clash = stack_family("clash");
  clash.keys = {config::keys::integer("model.hidden", 4, 1, 8, "hidden as one integer")};
  CHECK_THAT(error_of([&] { config::register_model_family(clash); }),
             Catch::Contains("declares model.hidden otherwise than the schema has it"));
  ModelFamily planless = stack_family("planless");
  planless.layers = nullptr;
  CHECK_THAT(error_of([&] { config::register_model_family(planless); }),
             Catch::Contains("model family \"planless\" needs its layers and split_widths"));
  CHECK(config::model_family_names().size() == 5);  // mlp, residual_mlp, transformer, llama, stack
}
