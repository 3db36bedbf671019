// Fuzzes the deck reader: the TOML scanner, the schema and every cross-key
// rule (config::run_config), with command-line overrides. The input is the
// deck text, then optionally a NUL byte and one override per line.

#include <string>
#include <vector>

#include "fuzz_target.hpp"
#include "kpipe/config/deck.hpp"
#include "kpipe/config/from_deck.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input = kpipe::fuzz::text_of(data, size);
  const std::size_t split = input.find('\0');
  const std::string_view deck_text = input.substr(0, split);
  std::vector<std::string> overrides;
  if (split != std::string_view::npos) {
    std::string_view rest = input.substr(split + 1);
    while (!rest.empty()) {
      const std::size_t end = rest.find('\n');
      overrides.emplace_back(rest.substr(0, end));
      rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    }
  }
  kpipe::fuzz::expect_accepted_or_refused([&] {
    std::vector<std::string> warnings;
    const kpipe::config::Deck deck = kpipe::config::parse_deck(deck_text, "fuzz.toml", overrides);
    kpipe::config::run_config(deck, &warnings);
    for (const std::string& warning : warnings) kpipe::fuzz::check_one_line(warning);
  });
  return 0;
}
