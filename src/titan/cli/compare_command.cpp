#include <fmt/format.h>

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
    "Usage: titan compare DIR_A DIR_B [--rtol R] [--force] [--plot FILE]\n"
    "Compares the per-step losses of two runs (their metrics.jsonl), A being the baseline.\n"
    "Refuses runs with different tokens per step, tokenizer or dataset files (run_manifest.json)\n"
    "unless --force. Writes both loss curves as SVG to FILE (default DIR_B/loss_compare.svg).\n"
    "  --rtol R   relative tolerance |loss_B - loss_A| / |loss_A| (default 1e-4)\n"
    "Exit code: 0 within tolerance, 1 diverged, 2 bad input.\n";

const FlagSpec& compare_flags() {
  static const FlagSpec spec{"compare", {"rtol", "plot"}, {"force"}, 2, kCompareUsage};
  return spec;
}

std::string folder_name(const fs::path& dir) {
  fs::path p = dir.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

void print_comparison(const tools::LossComparison& c, std::ostream& out) {
  out << fmt::format("{:>8}  {:>14}  {:>14}  {:>10}\n", "step", "loss A", "loss B", "rel diff");
  for (const auto& d : c.steps) {
    out << fmt::format("{:>8}  {:>14.8f}  {:>14.8f}  {:>10.3e}{}\n", d.step, d.loss_a, d.loss_b,
                       d.rel_diff, d.rel_diff <= c.rtol ? "" : "  > rtol");
  }
  out << fmt::format("compared {} step(s) logged by both runs", c.steps.size());
  if (c.only_in_a + c.only_in_b > 0) {
    out << fmt::format(" ({} logged by A only, {} by B only, not compared)", c.only_in_a,
                       c.only_in_b);
  }
  out << fmt::format("\nmax relative difference: {:.3e} at step {}\n", c.max_rel_diff,
                     c.max_rel_diff_step);
  if (c.within_tolerance()) {
    out << fmt::format("within tolerance: every compared step is within rtol {:g}\n", c.rtol);
  } else {
    out << fmt::format("DIVERGED: first step past rtol {:g} is step {}\n", c.rtol,
                       *c.first_bad_step);
  }
}

void write_plot(const tools::RunRecord& a, const tools::RunRecord& b, const fs::path& path) {
  std::string label_a = folder_name(a.folder), label_b = folder_name(b.folder);
  if (label_a == label_b) label_a = a.folder.string(), label_b = b.folder.string();
  std::vector<tools::PlotSeries> series(2);
  series[0].label = label_a + " (A)";
  series[1].label = label_b + " (B)";
  for (const auto& p : a.losses) series[0].points.emplace_back(p.step, p.loss);
  for (const auto& p : b.losses) series[1].points.emplace_back(p.step, p.loss);
  std::ofstream file(path);
  file << tools::loss_plot_svg(series, "loss: " + label_a + " vs " + label_b);
  if (!file.flush()) throw DataError(fmt::format("cannot write the plot to {}", path.string()));
}

}  // namespace

int compare_command(const Args& args) {
  auto flags = Flags::parse(compare_flags(), args);
  if (flags.help()) {
    std::cout << kCompareUsage;
    return 0;
  }
  const auto& dirs = flags.positionals();
  if (dirs.size() != 2) flags.fail(fmt::format("give two run folders, got {}", dirs.size()));
  const double rtol = flags.get_double("rtol", 1e-4);
  if (rtol < 0) flags.fail(fmt::format("--rtol must be >= 0, got {}", rtol));
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
      std::cerr << "titan compare: the losses of these runs are not comparable; pass --force to "
                   "compare them anyway\n";
      return 2;
    }
    auto comparison = tools::compare_losses(a, b, rtol);
    std::cout << fmt::format("A (baseline): {}\nB:            {}\n", a.folder.string(),
                             b.folder.string());
    print_comparison(comparison, std::cout);
    fs::path plot = flags.get("plot").value_or((b.folder / "loss_compare.svg").string());
    write_plot(a, b, plot);
    std::cout << "plot: " << plot.string() << "\n";
    return comparison.within_tolerance() ? 0 : 1;
  } catch (const DataError& e) {
    std::cerr << "titan compare: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace titan::cli
