#include "kpipe/io/profile.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <sstream>

#include "kpipe/core/error.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/core/version.hpp"
#include "kpipe/io/hdf5.hpp"

namespace kpipe::io {

namespace {

// HDF5 keeps attributes in the object header, which holds at most 64 KiB;
// a larger deck would fail the whole profile, so it is left out with a note.
constexpr std::size_t largest_text_attribute = 60000;

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : " ") + name;
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> names;
  for (std::string name; in >> name;) names.push_back(name);
  return names;
}

void write_table(hdf5::Group& group, const ActionTable& t) {
  group.write("rank", t.rank);
  group.write("step", t.step);
  group.write("index", t.index);
  group.write("kind", t.kind);
  group.write("microbatch", t.microbatch);
  group.write("chunk", t.chunk);
  group.write("stage", t.stage);
  group.write("peer", t.peer);
  group.write("tag", t.tag);
  group.write("start", t.start).set_attribute("units", "s");
  group.write("end", t.end).set_attribute("units", "s");
  group.write("bytes", t.bytes).set_attribute("units", "B");
  group.set_attribute("rows", static_cast<std::int64_t>(t.size()));
}

[[noreturn]] void malformed(const std::string& path, const std::string& why) {
  throw input_error(fmt::format("'{}' is not a readable kpipe profile: {}", printable(path), why));
}

ActionTable read_table(const std::string& path, const hdf5::Group& group, std::size_t kinds) {
  ActionTable t;
  t.rank = group.open_dataset("rank").read<std::int32_t>();
  t.step = group.open_dataset("step").read<std::int32_t>();
  t.index = group.open_dataset("index").read<std::int32_t>();
  t.kind = group.open_dataset("kind").read<std::int32_t>();
  t.microbatch = group.open_dataset("microbatch").read<std::int32_t>();
  t.chunk = group.open_dataset("chunk").read<std::int32_t>();
  t.stage = group.open_dataset("stage").read<std::int32_t>();
  t.peer = group.open_dataset("peer").read<std::int32_t>();
  t.tag = group.open_dataset("tag").read<std::int32_t>();
  t.start = group.open_dataset("start").read<double>();
  t.end = group.open_dataset("end").read<double>();
  t.bytes = group.open_dataset("bytes").read<std::int64_t>();
  const std::size_t n = t.size();
  for (const std::size_t size :
       {t.step.size(), t.index.size(), t.kind.size(), t.microbatch.size(), t.chunk.size(), t.stage.size(),
        t.peer.size(), t.tag.size(), t.start.size(), t.end.size(), t.bytes.size()}) {
    if (size != n) malformed(path, fmt::format("the columns of {} have different lengths", group.path()));
  }
  // Seconds from the step's start: finite, in range, and no action ends before it starts.
  for (std::size_t i = 0; i < n; ++i) {
    if (!(t.start[i] >= 0 && t.start[i] <= t.end[i] && t.end[i] <= limits::cost_seconds)) {
      malformed(path, fmt::format("{} row {} starts at {} s and ends at {} s; times are 0 to {} s and an action ends "
                                  "after it starts",
                                  group.path(), i, t.start[i], t.end[i], limits::cost_seconds));
    }
  }
  for (const std::int32_t code : t.kind) {
    if (code < 0 || static_cast<std::size_t>(code) >= kinds) {
      malformed(path, fmt::format("{}/kind holds the code {}, beyond the {} names of the attribute 'kinds'",
                                  group.path(), code, kinds));
    }
  }
  return t;
}

}  // namespace

void write_profile(const std::string& path, const Profile& profile) {
  const ProfileInfo& info = profile.info;
  auto file = hdf5::File::create(path, hdf5::File::Exists::truncate);
  file.set_attribute("format", profile_format);
  file.set_attribute("format_version", profile_format_version);
  file.set_attribute("software", "kpipe");
  file.set_attribute("software_version", info.software_version);
  file.set_attribute("date", info.date);
  file.set_attribute("backend", info.backend);
  file.set_attribute("device", info.device);
  file.set_attribute("schedule", info.schedule);
  file.set_attribute("p", info.p);
  file.set_attribute("v", info.v);
  file.set_attribute("m", info.m);
  file.set_attribute("d", info.d);
  file.set_attribute("steps", info.steps);
  file.set_attribute("microbatch_size", info.microbatch_size);
  file.set_attribute("scalar_bytes", info.scalar_bytes);
  file.set_attribute(
      "deck",
      info.deck.size() <= largest_text_attribute
          ? info.deck
          : fmt::format("(a deck of {} bytes, above HDF5's 64 KiB attribute limit, is not stored)", info.deck.size()));
  file.set_attribute("overrides", info.overrides);
  file.set_attribute("kinds", joined(profile.kind_names));

  auto measured = file.create_group("measured");
  write_table(measured, profile.measured);
  measured.write("step_start", profile.step_start).set_attribute("units", "s");

  auto predicted = file.create_group("predicted");
  write_table(predicted, profile.predicted);
  auto costs = predicted.create_dataset("stage_costs", hdf5::Type::float64,
                                        std::vector<std::uint64_t>{profile.stage_costs.size() / 3, 3});
  costs.write(profile.stage_costs);
  costs.set_attribute("units", "s");
  costs.set_attribute("columns", "F B W");
  file.close();
}

namespace {

// The read itself, rehearsed first (hdf5::Rehearsal).
Profile read_file(const std::string& path) {
  auto file = hdf5::File::open(path);
  if (!file.has_attribute("format") || file.string_attribute("format") != profile_format) {
    throw input_error(
        fmt::format("'{}' is an HDF5 file but not a kpipe profile (no root attribute format = \"{}\"; "
                    "write one with 'kpipe run DECK --profile FILE')",
                    printable(path), profile_format));
  }
  const std::string version = file.string_attribute("format_version");
  if (version.substr(0, version.find('.')) != "1") {
    malformed(path, fmt::format("format version {} is newer than this kpipe reads (1.x)", version));
  }
  Profile profile;
  ProfileInfo& info = profile.info;
  info.software_version = file.string_attribute("software_version");
  info.date = file.string_attribute("date");
  info.backend = file.string_attribute("backend");
  info.device = file.string_attribute("device");
  info.schedule = file.string_attribute("schedule");
  info.deck = file.string_attribute("deck");
  info.overrides = file.string_attribute("overrides");
  info.p = file.int_attribute("p");
  info.v = file.int_attribute("v");
  info.m = file.int_attribute("m");
  info.d = file.int_attribute("d");
  info.steps = file.int_attribute("steps");
  info.microbatch_size = file.int_attribute("microbatch_size");
  info.scalar_bytes = file.int_attribute("scalar_bytes");
  profile.kind_names = split(file.string_attribute("kinds"));

  const auto measured = file.open_group("measured");
  profile.measured = read_table(path, measured, profile.kind_names.size());
  profile.step_start = measured.open_dataset("step_start").read<double>();
  const auto predicted = file.open_group("predicted");
  profile.predicted = read_table(path, predicted, profile.kind_names.size());
  profile.stage_costs = predicted.open_dataset("stage_costs").read<double>();
  if (info.p < 1 || info.p > limits::pipeline_ranks || info.v < 1 || info.v > limits::chunks_per_rank || info.d < 1 ||
      info.d > limits::replicas || info.steps < 0 || info.steps > std::numeric_limits<int>::max()) {
    malformed(path, "p, v, d or steps out of range");
  }
  for (const double t : profile.step_start) {
    if (!(t >= 0 && t <= limits::cost_seconds)) {
      malformed(path, fmt::format("/measured/step_start holds {} s; times are 0 to {} s", t, limits::cost_seconds));
    }
  }
  if (profile.step_start.size() != static_cast<std::size_t>(info.p * info.d * info.steps)) {
    malformed(path, "/measured/step_start does not hold p · d · steps values");
  }
  for (const std::int32_t rank : profile.measured.rank) {
    if (rank < 0 || rank >= info.p * info.d) malformed(path, fmt::format("/measured/rank holds {}, not a rank", rank));
  }
  for (const std::int32_t step : profile.measured.step) {
    if (step < 0 || step >= info.steps) malformed(path, fmt::format("/measured/step holds {}, not a step", step));
  }
  for (const std::int32_t rank : profile.predicted.rank) {
    if (rank < 0 || rank >= info.p) malformed(path, fmt::format("/predicted/rank holds {}, not a pipeline rank", rank));
  }
  return profile;
}

}  // namespace

Profile read_profile(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    throw input_error(fmt::format("cannot read the profile '{}': {}", printable(path), std::strerror(errno)));
  }
  if (!S_ISREG(status.st_mode)) {
    throw input_error(fmt::format("cannot read the profile '{}': not a regular file", printable(path)));
  }
  if (!hdf5::is_hdf5(path)) {
    throw input_error(
        fmt::format("'{}' is not an HDF5 file; kpipe trace reads the profiles that 'kpipe run DECK "
                    "--profile FILE' writes",
                    printable(path)));
  }
  const hdf5::Rehearsal rehearsal(path, [&] { read_file(path); });
  return read_file(path);
}

}  // namespace kpipe::io
