#pragma once
// Wall-clock stamps for file metadata.

#include <string>

namespace kpipe {

// Now in UTC as openPMD writes its `date` attribute: "2026-11-30 19:57:41 +0000".
std::string utc_timestamp();

}  // namespace kpipe
