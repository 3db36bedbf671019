#include <set>

#include "catch.hpp"
#include "kpipe/config/deck.hpp"
#include "kpipe/config/schema.hpp"

using namespace kpipe::config;

TEST_CASE("every schema key is unique, documented and has a valid default", "[config]") {
  std::set<std::string> names;
  for (const auto& key : schema()) {
    INFO(key.name);
    CHECK(names.insert(key.name).second);
    CHECK(!key.doc.empty());
    CHECK(key.name.find('.') != std::string::npos);
    CHECK(key.default_value.index() == static_cast<std::size_t>(key.type));
  }
  // Each default passes the schema's own checks when written into a deck.
  std::string all_defaults;
  for (const auto& key : schema()) all_defaults += key.name + " = " + to_toml(key.default_value) + "\n";
  CHECK_NOTHROW(parse_deck(all_defaults, "defaults.toml"));
}

TEST_CASE("the Markdown reference lists every key", "[config]") {
  const std::string doc = schema_markdown();
  for (const auto& key : schema()) CHECK(doc.find("`" + key.name + "`") != std::string::npos);
}
