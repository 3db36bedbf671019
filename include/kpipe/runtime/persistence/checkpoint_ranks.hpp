#pragma once
// A checkpoint's agreements among its ranks (io::SharedFileRanks) as comm's
// collectives over one communicator, each waiting under the collective
// watchdog once the run has set it (comm::watch_collectives), whose line
// names them by `what` ("a checkpoint write").

#include <string>
#include <vector>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/io/shared_file.hpp"

namespace kpipe::runtime {

class CheckpointRanks final : public io::SharedFileRanks {
 public:
  CheckpointRanks(comm::Communicator comm, const char* what) : comm_(comm), what_(what) {}
  comm::Communicator communicator() const override { return comm_; }
  int rank() const override { return comm::rank_of(comm_); }
  std::vector<std::string> all_gather(const std::string& mine) const override {
    return comm::all_gather(comm_, mine, what_);
  }
  std::string broadcast(const std::string& text) const override { return comm::broadcast(comm_, 0, text, what_); }

 private:
  comm::Communicator comm_;
  const char* what_;  // a string literal
};

}  // namespace kpipe::runtime
