#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>

#include "titan/cli/commands.h"
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

struct CompareArgs {
  std::vector<std::string> dirs;
  double rtol = 1e-4;
  bool force = false;
  std::optional<std::string> plot;
};

// Returns an error message, or "" when the arguments are valid.
std::string parse(const Args& args, CompareArgs& out) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string key = args[i];
    std::optional<std::string> inline_value;
    if (auto eq = key.find('='); key.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = key.substr(eq + 1);
      key = key.substr(0, eq);
    }
    auto value = [&]() -> std::optional<std::string> {
      if (inline_value) return inline_value;
      if (i + 1 < args.size()) return args[++i];
      return std::nullopt;
    };
    if (key == "--force" && !inline_value) {
      out.force = true;
    } else if (key == "--rtol") {
      auto v = value();
      if (!v) return "--rtol needs a value";
      char* end = nullptr;
      out.rtol = std::strtod(v->c_str(), &end);
      if (v->empty() || *end != '\0' || !(out.rtol >= 0) || std::isinf(out.rtol)) {
        return fmt::format("--rtol must be a finite number >= 0, got '{}'", *v);
      }
    } else if (key == "--plot") {
      out.plot = value();
      if (!out.plot) return "--plot needs a file name";
    } else if (key.rfind("--", 0) == 0) {
      return fmt::format("unknown argument '{}'", key);
    } else {
      out.dirs.push_back(key);
    }
  }
  if (out.dirs.size() != 2) {
    return fmt::format("give exactly two run folders, got {}", out.dirs.size());
  }
  return "";
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
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kCompareUsage;
    return 0;
  }
  CompareArgs options;
  if (std::string error = parse(args, options); !error.empty()) {
    std::cerr << "titan compare: " << error << "\n" << kCompareUsage;
    return 2;
  }
  try {
    auto a = tools::read_run(options.dirs[0]);
    auto b = tools::read_run(options.dirs[1]);
    auto mismatches = tools::incompatibilities(a, b);
    for (const auto& m : mismatches) {
      std::cerr << fmt::format("titan compare: {}: {} differs: A ({}) has {}, B ({}) has {}\n",
                               options.force ? "warning" : "error", m.field, a.folder.string(),
                               m.value_a, b.folder.string(), m.value_b);
    }
    if (!mismatches.empty() && !options.force) {
      std::cerr << "titan compare: the losses of these runs are not comparable; pass --force to "
                   "compare them anyway\n";
      return 2;
    }
    auto comparison = tools::compare_losses(a, b, options.rtol);
    std::cout << fmt::format("A (baseline): {}\nB:            {}\n", a.folder.string(),
                             b.folder.string());
    print_comparison(comparison, std::cout);
    fs::path plot = options.plot ? fs::path(*options.plot) : b.folder / "loss_compare.svg";
    write_plot(a, b, plot);
    std::cout << "plot: " << plot.string() << "\n";
    return comparison.within_tolerance() ? 0 : 1;
  } catch (const DataError& e) {
    std::cerr << "titan compare: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace titan::cli
