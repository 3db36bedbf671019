// The kpipe executable: kpipe's own layer kinds and schedules, nothing added.
#include "kpipe/app/main.hpp"

int main(int argc, char** argv) { return kpipe::main(argc, argv); }
