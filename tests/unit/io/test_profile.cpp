#include "catch.hpp"

#include <unistd.h>
#include <cstdio>
#include <string>

#include "kpipe/core/error.hpp"
#include "kpipe/io/hdf5.hpp"
#include "kpipe/io/profile.hpp"

using namespace kpipe;

namespace {

std::string scratch(const std::string& name) { return "kpipe-test-profile-" + std::to_string(::getpid()) + "-" + name; }

void add(io::ActionTable& t, int rank, int step, int index, int kind, double start, double end) {
  t.rank.push_back(rank);
  t.step.push_back(step);
  t.index.push_back(index);
  t.kind.push_back(kind);
  t.microbatch.push_back(index);
  t.chunk.push_back(0);
  t.stage.push_back(rank);
  t.peer.push_back(kind == 1 ? 1 - rank : -1);
  t.tag.push_back(kind == 1 ? 2 * index : -1);
  t.start.push_back(start);
  t.end.push_back(end);
  t.bytes.push_back(kind == 1 ? 4096 : 0);
}

io::Profile small_profile() {
  io::Profile profile;
  profile.info.software_version = "0.1.0";
  profile.info.date = "2026-01-01T00:00:00Z";
  profile.info.backend = "Serial";
  profile.info.device = "Kokkos Serial";
  profile.info.schedule = "1f1b";
  profile.info.deck = "pipeline.stages = 2\n";
  profile.info.p = 2;
  profile.info.m = 1;
  profile.info.steps = 2;
  profile.info.microbatch_size = 16;
  profile.kind_names = {"F", "SEND_ACT"};
  for (int step = 0; step < 2; ++step) {
    for (int rank = 0; rank < 2; ++rank) {
      add(profile.measured, rank, step, 0, 0, 0.0, 1e-3);
      add(profile.measured, rank, step, 1, 1, 1e-3, 1.5e-3);
    }
  }
  profile.step_start = {0.0, 0.01, 0.0, 0.01};
  profile.stage_costs = {1e-3, 2e-3, 2e-3, 1e-3, 2e-3, 2e-3};
  add(profile.predicted, 0, -1, 0, 0, 0.0, 1e-3);
  return profile;
}

std::string error_of(const std::string& path) {
  try {
    io::read_profile(path);
  } catch (const Error& e) {
    CHECK(e.exit_code() == 2);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a profile reads back as written", "[io][profile]") {
  const std::string path = scratch("roundtrip.h5");
  const io::Profile written = small_profile();
  io::write_profile(path, written);
  const io::Profile read = io::read_profile(path);
  std::remove(path.c_str());
  CHECK(read.info.schedule == "1f1b");
  CHECK(read.info.deck == written.info.deck);
  CHECK(read.info.p == 2);
  CHECK(read.info.steps == 2);
  CHECK(read.kind_names == written.kind_names);
  CHECK(read.measured.kind == written.measured.kind);
  CHECK(read.measured.start == written.measured.start);
  CHECK(read.measured.bytes == written.measured.bytes);
  CHECK(read.measured.peer == written.measured.peer);
  CHECK(read.step_start == written.step_start);
  CHECK(read.stage_costs == written.stage_costs);
  CHECK(read.predicted.size() == 1);
}

TEST_CASE("what is not a kpipe profile is one input error naming the file", "[io][profile]") {
  CHECK(error_of("no-such-profile.h5") == "cannot read the profile 'no-such-profile.h5': No such file or directory");
  const std::string text = scratch("text.h5");
  {
    std::FILE* f = std::fopen(text.c_str(), "w");
    std::fputs("not hdf5\n", f);
    std::fclose(f);
  }
  CHECK(error_of(text).find("is not an HDF5 file") != std::string::npos);
  std::remove(text.c_str());

  const std::string other = scratch("other.h5");
  {
    auto file = io::hdf5::File::create(other);
    file.set_attribute("format", "openPMD");
  }
  CHECK(error_of(other).find("is an HDF5 file but not a kpipe profile") != std::string::npos);
  std::remove(other.c_str());

  const std::string bad_kind = scratch("bad-kind.h5");
  io::Profile profile = small_profile();
  profile.measured.kind[3] = 7;
  io::write_profile(bad_kind, profile);
  CHECK(error_of(bad_kind).find("/measured/kind holds the code 7, beyond the 2 names") != std::string::npos);
  std::remove(bad_kind.c_str());
}
