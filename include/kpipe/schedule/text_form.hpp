#pragma once
// The readable text form of a schedule: one action per line, the way users
// hand-write or edit a schedule (pipeline.schedule_file) and the way kpipe
// prints one.
//
//   # comments run to the end of the line
//   schedule name=1f1b p=2 v=1 m=2
//   rank 0
//     F mb=0 chunk=0
//     SEND_ACT mb=0 chunk=0 peer=1 tag=0
//     ...
//   rank 1
//     RECV_ACT mb=0 chunk=0 peer=0 tag=0
//     ...
//
// Compute and LOSS lines take mb= and chunk=; communication lines also peer=
// and tag=; REDUCE_GRADS and OPTIMIZER_STEP take nothing. A file with compute
// actions only is lowered by kpipe; a file with any other action is taken as
// the complete, lowered schedule. The name picks the stage placement: a
// registered schedule's (zb-v's V), looped (chunk c of rank r is stage c·p + r)
// for any other name.

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/schedule/schedule.hpp"

namespace kpipe::schedule {

void write_text(std::ostream& out, const Schedule& schedule);
std::string to_text(const Schedule& schedule);

// A schedule read from text, with the line each action came from.
struct ScheduleFile {
  std::string source;  // file name for messages
  Schedule schedule;
  std::vector<std::vector<std::int32_t>> lines;  // lines[r][i]: line of action i of rank r
};

// Any problem is an input error "source:line: ..." naming the bad token, with
// a did-you-mean suggestion for misspelled action kinds and fields.
ScheduleFile parse_text(std::string_view text, std::string_view source);
ScheduleFile read_schedule_file(const std::string& path);
// The text of a schedule file; a missing or unreadable file is an input error.
std::string read_schedule_text(const std::string& path);

// Lowers the file's schedule when it holds compute actions only, then
// validates it; problems are input errors "source:line: ..." at the line
// the offending action came from.
Schedule checked_schedule(ScheduleFile file);

}  // namespace kpipe::schedule
