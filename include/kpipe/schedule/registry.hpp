#pragma once
// The schedule registry (DESIGN.md §2): every schedule is one source file
// that describes itself in a ScheduleInfo (name, generator, constraints on
// (p, v, m), placement, theoretical bubble): kpipe's own are listed once in
// registry.cpp, a project's join through register_schedule at start-up. Generation, lowering, the bubble report and the
// deck's cross-key rules ask the registry; nothing else compares schedule names.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/schedule/placement.hpp"
#include "kpipe/schedule/schedule.hpp"
#include "kpipe/schedule/simulate.hpp"

namespace kpipe::schedule {

// What a constraint check sees. Users read its message, so it speaks in deck
// keys: the deck's B, b and d (the advice on train.global_batch needs them)
// and how the deck wrote pipeline.virtual_stages.
struct ShapeCheck {
  int p = 1;
  int v = 1;
  int m = 1;
  int microbatch_size = 1;  // train.microbatch_size (b)
  int data_parallel = 1;    // pipeline.data_parallel (d); B = m·b·d
  // e.g. "pipeline.virtual_stages = 2 (run.toml:3)"; empty: "pipeline.virtual_stages = <v>"
  std::string virtual_stages_source;

  // The ShapeCheck of a spec that did not come from a deck (b = d = 1).
  static ShapeCheck of(const ScheduleSpec& spec) { return {spec.p, spec.v, spec.m, 1, 1, {}}; }
  std::string describe_virtual_stages() const;
};

// The peak activation memory a schedule's authors bound it by, in
// stage-microbatches: one microbatch's activations of a whole pipeline stage,
// held from its F until its W (or BW), as the Zero Bubble papers count.
struct ActivationBound {
  int stage_microbatches = 0;
  std::string formula;  // e.g. "(p+2)//2"
};

// Appends one rank's compute actions (F, B, W, BW), in execution order, to `out`.
using RankGenerator = std::function<void(int rank, std::vector<Action>& out)>;

struct ScheduleInfo {
  std::string_view name;     // pipeline.schedule
  std::string_view summary;  // one line, for docs and `kpipe deck --doc`
  bool trains;               // false: inference only (forward)
  // Prepares the generator of a spec that passed `check`; generators that plan
  // all ranks at once do it here, once.
  RankGenerator (*generator)(const ScheduleSpec& spec);
  // Why the shape cannot be scheduled, in deck keys, or nullopt.
  std::optional<std::string> (*check)(const ShapeCheck& shape);
  Placement (*placement)(int p, int v);
  // The textbook bubble for these costs of one model stage, or nullopt.
  std::optional<TheoreticalBubble> (*bubble)(int p, int v, int m, const StageCosts& costs);
  // Advice on a valid but poor shape (a warning, not an error), or nullopt; may be null.
  std::optional<std::string> (*advice)(const ShapeCheck& shape) = nullptr;
  // Its generator reads ScheduleSpec::extra_warmup (pipeline.extra_warmup).
  bool takes_extra_warmup = false;
  // Its authors' bound on each rank's activation memory at p ranks; may be null.
  ActivationBound (*activation_bound)(int p) = nullptr;
};

// The registered schedule `name`; an input error with a did-you-mean suggestion otherwise.
const ScheduleInfo& find_schedule(std::string_view name);
// The registered schedule `name`, or nullptr (hand-written schedule files have their own names).
const ScheduleInfo* registered_schedule(std::string_view name);
// Every registered name, in the registry's order.
std::vector<std::string> schedule_names();

// Adds `info` (which must outlive every use: a function-local static) after
// kpipe's own schedules, before any deck is read: decks then accept its name
// and every consumer of the IR (validator, simulator, renderers, executor)
// runs it. An input error when a name is taken or an entry point is missing.
void register_schedule(const ScheduleInfo& info);

// An input error with the schedule's constraint message when `spec` (or, with
// the deck's numbers, `shape`) cannot be scheduled.
void check_shape(const ScheduleSpec& spec);
void check_shape(std::string_view name, const ShapeCheck& shape);
void check_shape(const ScheduleInfo& info, const ShapeCheck& shape);
// The schedule's advice on a shape that passed check_shape, if it has any.
std::optional<std::string> shape_advice(const ScheduleInfo& info, const ShapeCheck& shape);

// Look-ups by name so far in this process (find_schedule, registered_schedule):
// a run resolves its schedule once (config::run_config), and `kpipe run
// --json` reports this count so a test can hold it to that.
std::int64_t schedule_lookups();

// The registered schedule's bound on activation memory, if it states one.
std::optional<ActivationBound> activation_bound(const Schedule& schedule);

// The placement a schedule named `name` uses: the registered one, looped for unknown names.
Placement placement_of(std::string_view name, int p, int v);

}  // namespace kpipe::schedule
