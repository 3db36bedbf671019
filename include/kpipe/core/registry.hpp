#pragma once
// A registry of named kinds: kpipe's own first, then what a project adds at
// start-up through the same checks (model::register_layer_kind,
// runtime::register_data_source). References to its entries stay valid for
// the process's life; a name is taken once; an unknown name is an input
// error that lists the registered ones and the nearest.

#include <fmt/format.h>

#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/core/error.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe {

template <class Kind>  // Kind has a std::string `name`
class Registry {
 public:
  // Throws an input error naming what an incomplete kind lacks.
  using Check = void (*)(const Kind& kind);

  // `noun` as messages name an entry ("layer kind"); `builtins` in order.
  Registry(std::string noun, Check check, std::vector<Kind> builtins) : noun_(std::move(noun)), check_(check) {
    for (Kind& kind : builtins) add(std::move(kind));
  }

  const Kind& add(Kind kind) {
    if (kind.name.empty()) throw input_error(fmt::format("a {} needs a name", noun_));
    check_(kind);
    if (find(kind.name)) {
      throw input_error(fmt::format("{} \"{}\" is registered twice; give the new {} another name", noun_,
                                    printable(kind.name), noun_));
    }
    return kinds_.emplace_back(std::move(kind));
  }

  const Kind* find(std::string_view name) const {
    for (const Kind& entry : kinds_) {
      if (entry.name == name) return &entry;
    }
    return nullptr;
  }

  // The kind named `name`; the message starts with `key` (the deck key
  // that named it) when one is given.
  const Kind& at(std::string_view name, std::string_view key = {}) const {
    if (const Kind* kind = find(name)) return *kind;
    const auto known = names();
    const std::string nearest = nearest_match(name, known);
    throw input_error(fmt::format("{}unknown {} \"{}\"{}; registered {}s are {}",
                                  key.empty() ? "" : fmt::format("{}: ", key), noun_, printable(name),
                                  nearest.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", nearest), noun_,
                                  join_choices(known, " and ")));
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Kind& kind : kinds_) out.push_back(kind.name);
    return out;
  }

 private:
  std::string noun_;
  Check check_;
  std::deque<Kind> kinds_;  // a deque: references stay valid as kinds are added
};

}  // namespace kpipe
