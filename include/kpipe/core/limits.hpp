#pragma once
// Every limit kpipe puts on its inputs, in one place. Bad input must never
// crash, hang or exhaust memory (DESIGN.md §6): each limit is checked before
// the work it bounds, and each is far beyond what a real deck, schedule or
// terminal needs, so only a broken or hostile input meets it.

#include <cstddef>
#include <cstdint>
#include <limits>

namespace kpipe::limits {

// The ranges of individual deck keys live in the schema registry
// (config/schema.cpp), which documents them; the ones below are also what a
// schedule file's header may say, so both read them from here.

// Pipeline ranks (p) and model chunks per rank (v): far beyond any machine
// or any published schedule, and within what an Action's peer and chunk hold.
inline constexpr int pipeline_ranks = 4096;
inline constexpr int chunks_per_rank = 64;
inline constexpr int replicas = 65536;  // d
// Microbatches per step (m): a global batch of 2^30 samples.
inline constexpr int microbatches = 1 << 30;

// A schedule name reaches SVG, JSON and terminals: short and plain.
inline constexpr std::size_t schedule_name_bytes = 64;

// A deck is a page of TOML; the largest shipped deck is under 2 KB.
inline constexpr std::size_t deck_bytes = std::size_t{1} << 20;

// A schedule file holds one action per line (~20 bytes). 16 MiB is a lowered
// plan of ~800 thousand actions, e.g. p = 64, m = 1024, which is already far
// beyond what anyone writes or edits by hand.
inline constexpr std::size_t schedule_file_bytes = std::size_t{16} << 20;

// Brackets and braces open at once, and the parts of one dotted key. A deck
// nests at most 2 levels (a list in a key); toml11 parses nesting by
// recursion, and thousands of levels overflow the stack.
inline constexpr int toml_nesting_depth = 64;
inline constexpr int toml_dotted_key_parts = 64;

// Entries of one TOML list. The longest list a valid deck can hold is
// model.hidden or pipeline.partition with one entry per model stage:
// pipeline.stages <= 4096 times a few chunks each.
inline constexpr std::size_t toml_list_entries = 16384;

// Keys (key = value pairs and [table] headers) in one deck. The schema has
// ~40 keys; toml11 keeps a location per key, so this also bounds the parse.
inline constexpr std::size_t toml_keys = 1000;

// An error line (bounded_line, core/strings.hpp): at most error_line_bytes;
// a value quoted in it of more than quoted_value_bytes keeps its first
// quoted_value_head_bytes and states its length.
inline constexpr std::size_t error_line_bytes = 1000;
inline constexpr std::size_t quoted_value_bytes = 160;
inline constexpr std::size_t quoted_value_head_bytes = 64;

// A command-line override, key=value; the longest real one is a list.
inline constexpr std::size_t override_bytes = 64 * 1024;

// A generated or read plan holds about 6 actions per (rank, chunk,
// microbatch); beyond this many it would not fit in memory (12 bytes per
// action, plus 8 for its simulated time), so p·v·m <= plan_actions / 6.
inline constexpr double plan_actions = 250e6;
inline constexpr double actions_per_microbatch_and_chunk = 6.0;

// A schedule file needs one F per (rank, chunk, microbatch) of its header.
// A hand-broken file may miss a few, and the validator names the first one
// with its line; a file missing more than this many has a wrong header (m =
// 2^30 over a few lines) and is refused before anything is allocated per
// microbatch, so memory follows the file's size, not the header's claim.
inline constexpr std::int64_t schedule_missing_forwards = 4096;

// The SVG timeline is for figures: beyond this many boxes no viewer shows
// them and the file runs to gigabytes; --trace (Perfetto) takes any plan.
inline constexpr std::size_t svg_compute_actions = 100000;

// A request trace (kpipe serve) holds one JSON line per request, a prompt of
// at most model.context tokens each: 256 MiB is far beyond a replayed day.
inline constexpr std::size_t request_trace_bytes = std::size_t{256} << 20;
// One line of it holds a request of fewer than model.context prompt tokens:
// even the longest pieces, JSON-escaped, take far fewer bytes per token than
// this, and the fields besides the prompt fewer than the slack. A longer line
// is refused before it is parsed (a 100 MB line would take seconds and GBs).
inline constexpr std::size_t request_line_bytes_per_token = 256;
inline constexpr std::size_t request_line_slack_bytes = 4096;

// A UTF-8 text corpus (data.source = "text") is held whole, as code points and
// tokens too: about 9 bytes of memory a character. 256 MiB (the King James
// Bible is 4 MiB) stays near 2.5 GB; larger corpora go into an HDF5 token
// stream, read by hyperslab.
inline constexpr std::size_t text_data_bytes = std::size_t{256} << 20;

// A text encoded with SentencePiece (data.tokenizer = "sentencepiece") goes
// to the library in one call, which holds about 80 bytes a byte of text
// while it encodes (an 8 MiB text peaks at 0.68 GB): 32 MiB stays near 2.6 GB.
inline constexpr std::size_t subword_text_bytes = std::size_t{32} << 20;

// A SentencePiece model file (data.tokenizer_model): a 32k vocabulary is
// under 1 MiB; 64 MiB bounds a hostile one before it is parsed.
inline constexpr std::size_t tokenizer_model_bytes = std::size_t{64} << 20;

// A --json summary of kpipe run, sweep or serve, read back by kpipe plan
// --costs: kilobytes; 64 MiB bounds a hostile one.
inline constexpr std::size_t summary_json_bytes = std::size_t{64} << 20;

// COLUMNS from the environment is clamped: no terminal is wider, and a huge
// value would make `plan` print an ASCII timeline of hundreds of megabytes.
inline constexpr int terminal_columns = 1000;
// How deeply a JSON input (a request-trace line, a --costs summary) may
// nest: kpipe's own files nest 6 deep; a line of 10^5 brackets must not
// reach a recursive parser.
inline constexpr std::size_t json_depth = 32;
// The latest arrival a request trace may give, in seconds (about 11.6 days):
// a serve or a serving plan runs until the last arrival.
inline constexpr double arrival_seconds = 1e6;
// The largest time a cost file may give (--costs: a run's calibration or a
// sweep's fit), in seconds: beyond it the simulator's sums lose meaning.
inline constexpr double cost_seconds = 1e6;
// The largest message between ranks, in bytes: MPI counts are ints.
inline constexpr std::int64_t message_bytes = std::numeric_limits<int>::max();
// A string attribute of an HDF5 file kpipe reads (a checkpoint's deck, a
// dataset's vocabulary): the deck limit with room for its resolved form.
inline constexpr std::size_t attribute_bytes = 4 * deck_bytes;
// The slowest file system a checkpoint write is allowed, per rank: the
// watchdog's deadline on a write grows by a second per this many bytes.
inline constexpr double slowest_write_bytes_per_second = 16.0 * (1 << 20);
// An HDF5 file kpipe reads is first walked whole in a child process (io's
// hdf5_check.hpp); the walk may take this long plus a second per this many
// bytes of file before the file counts as one that hangs libhdf5.
inline constexpr double hdf5_walk_seconds = 10.0;
inline constexpr double slowest_read_bytes_per_second = 16.0 * (1 << 20);
// A layer's width per sample: model.input_dim, model.output_dim and what a
// dataset file may declare for them (a dimension of 2^32 + n must never
// reach a 32-bit int).
inline constexpr int layer_width = 1 << 20;
// `kpipe plan` lists ranks and boundaries one per line up to this many;
// beyond, the largest alone.
inline constexpr int listed_ranks = 16;

// Simulated costs (sim.cost_*, sim.comm_latency) in arbitrary units: with at
// most plan_actions actions of at most this cost the makespan stays finite
// (and exact to ~1e-7 relative), and no cost ratio anyone studies needs more.
inline constexpr double sim_cost = 1e9;

}  // namespace kpipe::limits
