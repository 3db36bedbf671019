#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <ostream>
#include <vector>

#include "kpipe/core/error.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/schedule/render.hpp"
#include "report_format.hpp"

namespace kpipe::schedule {

namespace {

// Layout in pixels.
constexpr double left = 70.0;  // rank labels
constexpr double top = 78.0;   // title and legend
constexpr double row_height = 28.0;
constexpr double row_gap = 8.0;
constexpr double right = 24.0;
constexpr double axis_height = 46.0;
constexpr double panel_label_height = 24.0;  // a labelled timeline's heading
constexpr double narrowest_box = 24.0;       // the shortest action, wide enough for two digits
constexpr double narrowest_plot = 480.0;
constexpr double widest_plot = 1800.0;
constexpr double title_char_width = 8.8;  // 15 px bold sans-serif, on average

struct Rgb {
  double r, g, b;
};
// Per kind a dark and a light shade; chunk 0 is darkest, chunk v-1 lightest
// (as in Megatron's interleaved figure). Plain pipelines use one middle shade.
struct Palette {
  Rgb dark, light;
};
Palette palette(ActionKind kind) {
  switch (kind) {
    case ActionKind::forward:
      return {{47, 109, 181}, {168, 204, 240}};
    case ActionKind::backward_input:
      return {{46, 139, 87}, {166, 219, 160}};
    case ActionKind::backward_weight:
      return {{117, 84, 168}, {206, 186, 232}};
    default:
      return {{214, 96, 33}, {250, 196, 150}};  // BW
  }
}

Rgb shade(ActionKind kind, int chunk, int v) {
  const Palette colors = palette(kind);
  const double t = v > 1 ? static_cast<double>(chunk) / (v - 1) : 0.45;
  return {colors.dark.r + t * (colors.light.r - colors.dark.r), colors.dark.g + t * (colors.light.g - colors.dark.g),
          colors.dark.b + t * (colors.light.b - colors.dark.b)};
}
std::string hex(const Rgb& c) {
  return fmt::format("#{:02x}{:02x}{:02x}", static_cast<int>(c.r), static_cast<int>(c.g), static_cast<int>(c.b));
}
// Dark text on light boxes, white on dark ones.
const char* text_colour(const Rgb& c) { return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b > 150 ? "#111" : "#fff"; }

// The schedule name comes from a user's file: never let it become markup.
std::string xml_escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string legend_label(ActionKind kind) {
  switch (kind) {
    case ActionKind::forward:
      return "F forward";
    case ActionKind::backward_input:
      return "B input gradient";
    case ActionKind::backward_weight:
      return "W weight gradient";
    default:
      return "BW full backward";
  }
}

// Timelines one above the other on one time scale (a measured run above its
// simulation shows the bubble the model missed). One timeline without a
// label is the plan figure: its statistics go under the title.
class SvgTimeline {
 public:
  explicit SvgTimeline(const std::vector<Timeline>& panels) : panels_(panels) {
    double longest = 0.0;
    for (const Timeline& t : panels_) longest = std::max(longest, t.makespan);
    double shortest = longest;
    for (const Timeline& t : panels_) {
      for (const auto& actions : t.ranks) {
        for (const TimedAction& a : actions) {
          const double duration = a.end - a.start;
          if (!is_compute(a.action.kind) || duration <= 0.0) continue;
          shortest = std::min(shortest, duration);
          for_each_part(a.action, [&](const Action& part) { present_[static_cast<std::size_t>(part.kind)] = true; });
          overlapped_ = overlapped_ || a.action.kind == ActionKind::forward_backward;
        }
      }
    }
    if (longest <= 0.0) longest = shortest = 1.0;
    scale_ = std::min(std::max(narrowest_box / shortest, narrowest_plot / longest), widest_plot / longest);
    width_ = left + longest * scale_ + right;
    height_ = top;
    for (const Timeline& t : panels_) height_ += panel_height(t);
  }

  std::string render() {
    const Timeline& first = panels_.front();
    title(first);
    legend(first.v);
    double y = top;
    for (const Timeline& t : panels_) {
      panel(t, y);
      y += panel_height(t);
    }
    // The canvas is as wide as the plot, or as the title and legend when those are wider.
    return fmt::format(
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 "
               "{0:.0f} {1:.0f}\" font-family=\"Helvetica, Arial, sans-serif\">\n<rect width=\"100%\" "
               "height=\"100%\" fill=\"#fff\"/>\n",
               std::max(width_, text_right_ + right), height_) +
           out_ + "</svg>\n";
  }

 private:
  bool labelled() const { return panels_.size() > 1 || !panels_.front().label.empty(); }
  double panel_height(const Timeline& t) const {
    return (labelled() ? panel_label_height : 0.0) + t.p * (row_height + row_gap) + axis_height;
  }

  static std::string statistics(const Timeline& t) {
    const std::string unit = t.unit.empty() ? "" : " " + t.unit;
    return fmt::format("makespan {}{}, bubble: idle/total {:.1f}%, idle/useful {:.1f}% (grey = idle)",
                       detail::format_time(t.makespan), unit, 100.0 * t.bubble.idle_over_total,
                       100.0 * t.bubble.idle_over_useful);
  }

  void title(const Timeline& t) {
    const std::string heading = fmt::format("{} schedule: p = {} ranks, v = {} chunk{} per rank, m = {} microbatches",
                                            t.name, t.p, t.v, t.v > 1 ? "s" : "", t.m);
    out_ += fmt::format("<text x=\"{}\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>\n", left,
                        xml_escaped(heading));
    text_right_ = std::max(text_right_, left + title_char_width * static_cast<double>(heading.size()));
    const std::string below = labelled() ? "each timeline drawn on the same time scale" : statistics(t);
    out_ += fmt::format("<text x=\"{}\" y=\"40\" font-size=\"12\" fill=\"#444\">{}</text>\n", left, below);
  }

  void swatch(double& x, const Rgb& colour, const std::string& label) {
    out_ += fmt::format("<rect x=\"{:.1f}\" y=\"50\" width=\"14\" height=\"14\" fill=\"{}\"/>\n", x, hex(colour));
    out_ += fmt::format("<text x=\"{:.1f}\" y=\"61.5\" font-size=\"12\">{}</text>\n", x + 19, label);
    x += 30 + 6.8 * static_cast<double>(label.size());
  }

  void legend(int v) {
    double x = left;
    for (const ActionKind kind :
         {ActionKind::forward, ActionKind::backward_input, ActionKind::backward_weight, ActionKind::backward}) {
      if (present_[static_cast<std::size_t>(kind)]) swatch(x, shade(kind, 0, v == 1 ? 1 : 2), legend_label(kind));
    }
    swatch(x, {235, 235, 235}, "idle");
    if (v > 1) {
      for (int c = 0; c < v; ++c) swatch(x, shade(ActionKind::forward, c, v), fmt::format("chunk {}", c));
    }
    const std::string note =
        overlapped_ ? "box numbers: microbatch; split boxes: F&B, its F above its BW" : "box numbers: microbatch";
    out_ +=
        fmt::format("<text x=\"{:.1f}\" y=\"61.5\" font-size=\"12\" fill=\"#444\">{}</text>\n", x, xml_escaped(note));
    text_right_ = std::max(text_right_, x + 6.8 * static_cast<double>(note.size()));
  }

  void panel(const Timeline& t, double y) {
    if (labelled()) {
      const std::string label = fmt::format("{}: {}", t.label, statistics(t));
      out_ += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"13\" font-weight=\"bold\">{}</text>\n", left, y + 16,
                          xml_escaped(label));
      text_right_ = std::max(text_right_, left + 7.6 * static_cast<double>(label.size()));
      y += panel_label_height;
    }
    for (int rank = 0; rank < t.p; ++rank) row(t, rank, y + rank * (row_height + row_gap));
    axis(t, y + t.p * (row_height + row_gap) + 2);
  }

  void row(const Timeline& t, int rank, double y) {
    out_ += fmt::format(
        "<text x=\"{}\" y=\"{:.1f}\" font-size=\"13\" text-anchor=\"end\">rank {}</text>\n<rect x=\"{}\" y=\"{:.1f}\" "
        "width=\"{:.2f}\" height=\"{}\" fill=\"#ebebeb\"/>\n",
        left - 10, y + row_height / 2 + 4.5, rank, left, y, t.makespan * scale_, row_height);
    for (const TimedAction& a : t.ranks[rank]) {
      const double duration = a.end - a.start;
      if (!is_compute(a.action.kind) || duration <= 0.0) continue;
      const double x = left + a.start * scale_;
      if (a.action.kind == ActionKind::forward_backward) {
        // Both halves run for the whole box: the F above, the BW below.
        const std::string title = describe(a.action);
        box(rank, forward_half(a.action), title, t.v, x, y, duration * scale_, row_height / 2);
        box(rank, backward_half(a.action), title, t.v, x, y + row_height / 2, duration * scale_, row_height / 2);
      } else {
        box(rank, a.action, describe(a.action), t.v, x, y, duration * scale_, row_height);
      }
    }
  }

  void box(int rank, const Action& a, const std::string& title, int v, double x, double y, double w, double h) {
    const Rgb colour = shade(a.kind, a.chunk, v);
    out_ += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" stroke=\"#fff\" "
        "stroke-width=\"1\"><title>rank {}: {}</title></rect>\n",
        x, y, w, h, hex(colour), rank, xml_escaped(title));
    const std::string number = std::to_string(a.microbatch);
    if (w < 7.0 * static_cast<double>(number.size()) + 4.0) return;
    const double size = h < row_height ? 10.0 : 12.0;
    out_ +=
        fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
                    x + w / 2, y + h / 2 + size * 0.35, size, text_colour(colour), number);
  }

  void axis(const Timeline& t, double y) {
    out_ += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{:.2f}\" y2=\"{:.1f}\" stroke=\"#333\"/>\n", left, y,
                        left + t.makespan * scale_, y);
    const double step = detail::round_step(60.0 / scale_);
    for (double time = 0.0; time <= t.makespan + 1e-9; time += step) {
      const double x = left + time * scale_;
      out_ += fmt::format(
          "<line x1=\"{0:.2f}\" y1=\"{1:.1f}\" x2=\"{0:.2f}\" y2=\"{2:.1f}\" stroke=\"#333\"/>\n<text x=\"{0:.2f}\" "
          "y=\"{3:.1f}\" font-size=\"11\" text-anchor=\"middle\">{4}</text>\n",
          x, y, y + 5, y + 17, detail::format_time(time));
    }
    const std::string unit =
        t.unit.empty() ? std::string("simulated units: sim.cost_* of the deck") : xml_escaped(t.unit);
    out_ += fmt::format(
        "<text x=\"{:.2f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\" fill=\"#444\">time "
        "({})</text>\n",
        left + t.makespan * scale_ / 2, y + 36, unit);
  }

  const std::vector<Timeline>& panels_;
  std::array<bool, action_kind_count> present_{};  // per kind, F&B's halves counted as F and BW
  bool overlapped_ = false;                        // some box is an F&B
  double scale_ = 1.0;
  double width_ = 0.0;
  double height_ = 0.0;
  double text_right_ = 0.0;  // right end of the title, legend and panel labels
  std::string out_;
};

std::size_t compute_boxes(const std::vector<Timeline>& panels) {
  std::size_t n = 0;
  for (const Timeline& t : panels) {
    for (const auto& actions : t.ranks) {
      n += static_cast<std::size_t>(std::count_if(actions.begin(), actions.end(),
                                                  [](const TimedAction& a) { return is_compute(a.action.kind); }));
    }
  }
  return n;
}

}  // namespace

void require_svg_fits(double compute_actions) {
  if (compute_actions <= static_cast<double>(limits::svg_compute_actions)) return;
  throw input_error(
      fmt::format("the SVG timeline would draw {:.0f} boxes; it is meant for plans of at most {} compute "
                  "actions: use --trace (Perfetto) for this plan, or plan fewer ranks or microbatches",
                  compute_actions, limits::svg_compute_actions));
}

void write_svg_timeline(std::ostream& out, const Schedule& schedule, const SimulationResult& result) {
  std::size_t compute = 0;
  for (const auto& actions : schedule.ranks) {
    compute += static_cast<std::size_t>(
        std::count_if(actions.begin(), actions.end(), [](const Action& a) { return is_compute(a.kind); }));
  }
  require_svg_fits(static_cast<double>(compute));  // before the timeline is built
  write_svg_timelines(out, {simulated_timeline(schedule, result)});
}

void write_svg_timelines(std::ostream& out, const std::vector<Timeline>& panels) {
  if (panels.empty()) throw runtime_error("write_svg_timelines: no timeline to draw");
  require_svg_fits(static_cast<double>(compute_boxes(panels)));
  out << SvgTimeline(panels).render();
}

}  // namespace kpipe::schedule
