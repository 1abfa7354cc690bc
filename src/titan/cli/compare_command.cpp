#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>

#include "titan/cli/commands.h"
#include "titan/cli/flags.h"
#include "titan/errors.h"
#include "titan/tools/compare.h"
#include "titan/tools/loss_plot.h"

namespace titan::cli {
namespace fs = std::filesystem;
namespace {

constexpr const char* kCompareUsage =
    "Usage: titan compare DIR_A DIR_B [--rtol R] [--grad_rtol G] [--force] [--plot FILE]\n"
    "Compares the per-step losses and gradient norms of two runs (their metrics.jsonl), A being\n"
    "the baseline: AdamW hides a wrong gradient scale from the loss, not from the gradient norm.\n"
    "Refuses runs with different tokens per step, tokenizer or dataset files (run_manifest.json)\n"
    "unless --force. Writes both runs' loss and gradient-norm curves as SVG to FILE (default\n"
    "DIR_B/loss_compare.svg), the first step past the tolerance marked.\n"
    "  --rtol R       relative tolerance |loss_B - loss_A| / |loss_A| (default 1e-4)\n"
    "  --grad_rtol G  the same for grad_norm (default: R)\n"
    "Exit code: 0 within tolerance, 1 diverged, 2 bad input.\n";

const FlagSpec& compare_flags() {
  static const FlagSpec spec{"compare", {"rtol", "grad_rtol", "plot"}, {"force"}, 2,
                             kCompareUsage};
  return spec;
}

std::string folder_name(const fs::path& dir) {
  fs::path p = dir.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

void print_comparison(const tools::RunComparison& c, std::ostream& out) {
  constexpr const char* kRow = "{:>8}  {:>14}  {:>14}  {:>10}  {:>12}  {:>12}  {:>10}{}{}\n";
  out << fmt::format(kRow, "step", "loss A", "loss B", "rel diff", "grad_norm A", "grad_norm B",
                     "rel diff", "", "");
  for (const auto& d : c.steps) {
    out << fmt::format(kRow, d.a.step, fmt::format("{:.8f}", d.a.loss),
                       fmt::format("{:.8f}", d.b.loss), fmt::format("{:.3e}", d.loss_rel_diff),
                       fmt::format("{:.6f}", d.a.grad_norm), fmt::format("{:.6f}", d.b.grad_norm),
                       fmt::format("{:.3e}", d.grad_norm_rel_diff),
                       d.loss_rel_diff <= c.rtol ? "" : "  loss > rtol",
                       d.grad_norm_rel_diff <= c.grad_rtol ? "" : "  grad_norm > grad_rtol");
  }
  out << fmt::format("compared {} step(s) logged by both runs", c.steps.size());
  if (c.only_in_a + c.only_in_b > 0) {
    out << fmt::format(" ({} logged by A only, {} by B only, not compared)", c.only_in_a,
                       c.only_in_b);
  }
  out << fmt::format("\nmax relative difference: loss {:.3e} at step {}, grad_norm {:.3e} at "
                     "step {}\n",
                     c.max_loss_diff.value, c.max_loss_diff.step, c.max_grad_norm_diff.value,
                     c.max_grad_norm_diff.step);
  if (c.within_tolerance()) {
    out << fmt::format("within tolerance: every compared step is within rtol {:g} (loss) and "
                       "{:g} (grad_norm)\n",
                       c.rtol, c.grad_rtol);
  } else {
    out << fmt::format("DIVERGED: first step past rtol {:g} (loss) or {:g} (grad_norm) is step "
                       "{}\n",
                       c.rtol, c.grad_rtol, *c.first_bad_step);
  }
}

// The loss and the gradient norm of both runs, the first step past the tolerance marked.
void write_plot(const tools::RunRecord& a, const tools::RunRecord& b,
                const tools::RunComparison& comparison, const fs::path& path) {
  std::string label_a = folder_name(a.folder), label_b = folder_name(b.folder);
  if (label_a == label_b) label_a = a.folder.string(), label_b = b.folder.string();
  const std::vector<tools::PlotSeries> runs = {{label_a + " (A)", {}}, {label_b + " (B)", {}}};
  std::vector<tools::PlotPanel> panels = {{"loss", runs}, {"grad_norm", runs}};
  for (const auto* run : {&a, &b}) {
    const size_t i = run == &a ? 0 : 1;
    for (const auto& p : run->points) {
      panels[0].series[i].points.emplace_back(p.step, p.loss);
      panels[1].series[i].points.emplace_back(p.step, p.grad_norm);
    }
  }
  std::optional<tools::PlotMarker> marker;
  if (comparison.first_bad_step) {
    marker = tools::PlotMarker{static_cast<double>(*comparison.first_bad_step),
                               fmt::format("first step past tolerance: {}",
                                           *comparison.first_bad_step)};
  }
  std::ofstream file(path);
  file << tools::plot_svg(panels, label_a + " vs " + label_b, marker);
  if (!file.flush()) throw DataError(fmt::format("cannot write the plot to {}", path.string()));
}

}  // namespace

int compare_command(const Args& args) {
  auto flags = Flags::parse(compare_flags(), args);
  const auto& dirs = flags.positionals();
  if (dirs.size() != 2) flags.fail(fmt::format("give two run folders, got {}", dirs.size()));
  const double rtol = flags.get_double("rtol", 1e-4);
  const double grad_rtol = flags.get_double("grad_rtol", rtol);
  if (rtol < 0 || grad_rtol < 0) flags.fail("--rtol and --grad_rtol must be >= 0");
  const bool force = flags.has("force");
  try {
    auto a = tools::read_run(dirs[0]);
    auto b = tools::read_run(dirs[1]);
    auto mismatches = tools::incompatibilities(a, b);
    for (const auto& m : mismatches) {
      std::cerr << fmt::format("titan compare: {}: {} differs: A ({}) has {}, B ({}) has {}\n",
                               force ? "warning" : "error", m.field, a.folder.string(),
                               m.value_a, b.folder.string(), m.value_b);
    }
    if (!mismatches.empty() && !force) {
      std::cerr << "titan compare: the curves of these runs are not comparable; pass --force to "
                   "compare them anyway\n";
      return 2;
    }
    if (const auto changed = tools::changed_variables(a, b); changed.size() > 1) {
      std::cerr << fmt::format(
          "titan compare: warning: {} all changed between the runs; a comparison that changes "
          "one at a time tells which one moved the curve\n",
          fmt::join(changed, ", "));
    }
    auto comparison = tools::compare_runs(a, b, rtol, grad_rtol);
    std::cout << fmt::format("A (baseline): {}\nB:            {}\n", a.folder.string(),
                             b.folder.string());
    print_comparison(comparison, std::cout);
    fs::path plot = flags.get("plot").value_or((b.folder / "loss_compare.svg").string());
    write_plot(a, b, comparison, plot);
    std::cout << "plot: " << plot.string() << "\n";
    return comparison.within_tolerance() ? 0 : 1;
  } catch (const DataError& e) {
    std::cerr << "titan compare: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace titan::cli
