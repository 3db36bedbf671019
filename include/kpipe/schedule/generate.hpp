#pragma once
// Schedule generation: the registered schedule's generator (registry.hpp)
// emits the compute actions (F, B, W, BW) of every rank in execution order,
// and the schedule takes the schedule's placement; lower() then adds
// communication and step actions. The schedules (src/schedule, one file each):
//
//   gpipe        all forwards, then all full backwards in ascending microbatch order
//   1f1b         warm-up min(p-r-1, m) forwards (k more on all but the last rank
//                with pipeline.extra_warmup = k), then one forward and one backward
//                in turn, then the remaining backwards (PipeDream-Flush, Megatron)
//   interleaved  Megatron's virtual pipeline with v >= 2 chunks per rank
//   zb-h1        1F1B (its extra warm-up too) with the backward split into B and
//                W; rank r defers its first r W's so that the B's everybody
//                upstream waits for run first, and the W's fill the bubbles
//                (Qi et al., ZB-H1)
//   zb-h2        split backward with up to 2(p-r)-1 warm-up forwards, W's filling
//                every gap: no gap from a rank's first F to its last W (ZB-H2)
//   zb-v         split backward over two chunks per rank in a V (Qi et al., ZB-V)
//   forward      forward passes only, for inference and evaluation

#include <string>
#include <vector>

#include "kpipe/schedule/registry.hpp"
#include "kpipe/schedule/schedule.hpp"

namespace kpipe::schedule {

// The compute actions of `spec`; an input error when the spec is not
// schedulable (unknown name, a shape the schedule's constraints refuse, or
// more actions than a plan can hold in memory).
Schedule generate(const ScheduleSpec& spec);

// generate() then lower(), one rank at a time: the same schedule, without
// ever holding the compute-only form of a large plan in memory (schedules
// planned across ranks, zb-h2 and zb-v, hold it until their rank is lowered).
Schedule generate_lowered(const ScheduleSpec& spec);

// Forward passes only, lowered, for m microbatches on the ranks and chunk
// placement of `training`: each rank runs its chunks' F in (microbatch, model
// stage) order, which no dependency can deadlock. Training runs evaluate
// their validation split with it (train.eval_every) on the chunks they hold.
Schedule forward_schedule(const Schedule& training, int m);

// Interleaved schedules process microbatches in groups of g per chunk
// (Megatron's microbatch_group_size_per_vp_stage). g = p when p divides m;
// otherwise the smallest g >= p that leaves a last group of 0 or >= p
// microbatches, so that every m >= p has a schedule without stalls.
int interleaved_group_size(int m, int p);

}  // namespace kpipe::schedule
