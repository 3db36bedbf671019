#pragma once
// A schedule of the project's own, registered with kpipe: "1f1b-reserve".

#include "kpipe/schedule/registry.hpp"

namespace custom {

const kpipe::schedule::ScheduleInfo& reserve_schedule_info();

}  // namespace custom
