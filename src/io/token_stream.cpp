#include "kpipe/io/token_stream.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "kpipe/core/error.hpp"

namespace kpipe::io {

namespace {

[[noreturn]] void bad(const std::string& file, const std::string& what) {
  throw input_error(
      fmt::format("data.path = \"{}\": {} (layout: docs/formats.md, \"Token streams\"; examples/data/bible_kjv.py "
                  "writes one)",
                  file, what));
}

// The split's tokens dataset, checked: present, 1-D, int32, not empty.
hdf5::Dataset tokens_of(const hdf5::File& file, Split split) {
  const std::string name = name_of(split);
  if (!file.has(name)) bad(file.file_name(), fmt::format("has no group /{}", name));
  const auto group = file.open_group(name);
  if (!group.has("tokens")) {
    bad(file.file_name(), fmt::format("has no dataset /{}/tokens{}", name,
                                      group.has("x") ? " (it holds samples /x and /y, which an MLP reads)" : ""));
  }
  auto tokens = group.open_dataset("tokens");
  const auto shape = tokens.shape();
  if (shape.size() != 1 || tokens.type() != hdf5::Type::int32) {
    bad(file.file_name(), fmt::format("/{}/tokens is {}-D {}; it must be 1-D int32 token ids", name, shape.size(),
                                      hdf5::name_of(tokens.type())));
  }
  if (shape[0] == 0) bad(file.file_name(), fmt::format("/{}/tokens is empty", name));
  return tokens;
}

// The read itself, rehearsed first (hdf5::Rehearsal).
TokenStream read_file(const std::string& file_name, Split split) {
  const auto file = hdf5::File::open(file_name);
  if (!file.has_attribute("format") || file.string_attribute("format") != DatasetFile::format_name) {
    bad(file_name, fmt::format("the root attribute format is not \"{}\"", DatasetFile::format_name));
  }
  if (file.has_attribute("format_version") && file.int_attribute("format_version") > DatasetFile::format_version) {
    bad(file_name, fmt::format("format_version {} is newer than this kpipe reads ({})",
                               file.int_attribute("format_version"), DatasetFile::format_version));
  }
  if (!file.has_attribute("vocabulary")) {
    bad(file_name, "has no root attribute vocabulary (the symbols in token order, one UTF-8 string)");
  }
  TokenStream stream;
  stream.vocabulary = file.string_attribute("vocabulary");
  if (stream.vocabulary.empty()) bad(file_name, "the root attribute vocabulary is empty");
  if (file.has_attribute("vocabulary_size")) stream.vocabulary_size = file.int_attribute("vocabulary_size");
  const auto train = tokens_of(file, Split::train);
  const auto test = tokens_of(file, Split::test);
  stream.tokens = (split == Split::train ? train : test).read<std::int32_t>();
  return stream;
}

}  // namespace

TokenStream read_token_stream(const std::string& file_name, Split split) {
  if (!hdf5::is_hdf5(file_name)) {
    std::error_code error;
    const bool exists = std::filesystem::exists(file_name, error);
    throw input_error(
        fmt::format("data.path = \"{}\" {}; make a token stream with examples/data/bible_kjv.py, or "
                    "set data.source = \"text\" for a UTF-8 text file",
                    file_name, exists ? "is not an HDF5 file" : "does not exist"));
  }
  const hdf5::Rehearsal rehearsal(file_name, [&] { read_file(file_name, split); });
  return read_file(file_name, split);
}

}  // namespace kpipe::io
