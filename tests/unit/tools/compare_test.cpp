// titan compare on synthetic run folders: the library (reading, compatibility, tolerances on the
// loss and the gradient norm) and the command's exit codes, messages and plot.
#include "titan/tools/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "support/process.h"
#include "titan/errors.h"

namespace titan {
namespace unit_tools_compare_test {

namespace fs = std::filesystem;
using testing::run_command;

struct FakeRun {
  std::vector<double> losses;  // steps 1, 2, ...
  double grad_scale = 1.0;     // grad_norm of step s = grad_scale / s
  int64_t tokens_per_step = 2048;
  std::string tokenizer = "byte";
  std::string sha256 = "ab12";
  std::string flavor = "debugmodel";
  int64_t seq_len = 64;
  std::string layout = "pp 1 x dp_replicate 1 x dp_shard 2 x cp 1 x tp 1 (world 2)";
};

fs::path write_run(const fs::path& root, const std::string& name, const FakeRun& run) {
  fs::path dir = root / name;
  fs::create_directories(dir);
  std::ofstream metrics(dir / "metrics.jsonl");
  for (size_t i = 0; i < run.losses.size(); ++i) {
    metrics << nlohmann::json{{"step", i + 1},
                              {"loss", run.losses[i]},
                              {"grad_norm", run.grad_scale / double(i + 1)}}
                   .dump()
            << "\n";
  }
  nlohmann::json manifest = {
      {"model", {{"name", "llama3"}, {"flavor", run.flavor}}},
      {"data",
       {{"tokenizer", run.tokenizer},
        {"files", {{{"path", "/data/" + name + ".txt"}, {"bytes", 10}, {"sha256", run.sha256}}}},
        {"tokens_per_step", run.tokens_per_step}}},
      {"world", {{"layout", run.layout}}},
      {"config_toml", "[training]\nseq_len = " + std::to_string(run.seq_len) + "\n"}};
  std::ofstream(dir / "run_manifest.json") << manifest.dump(2);
  return dir;
}

const std::vector<double> kLosses = {7.5, 6.25, 5.125, 4.75, 4.5};

class CompareTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = testing::make_temp_dir("titan_compare"); }
  void TearDown() override { fs::remove_all(root_); }

  testing::CommandResult compare(const fs::path& a, const fs::path& b,
                                 const std::string& extra = "") {
    return run_command(testing::titan_binary() + " compare " + a.string() + " " + b.string() +
                       " " + extra);
  }

  fs::path root_;
};

TEST_F(CompareTest, IdenticalRunsAreWithinToleranceAndPlotted) {
  auto a = write_run(root_, "runA", {kLosses});
  auto b = write_run(root_, "runB", {kLosses});
  auto r = compare(a, b);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("compared 5 step(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("within tolerance"), std::string::npos) << r.output;
  std::ifstream svg(b / "loss_compare.svg");
  ASSERT_TRUE(svg) << r.output;
  std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  size_t polylines = 0;
  for (size_t at = text.find("<polyline"); at != std::string::npos;
       at = text.find("<polyline", at + 1)) {
    ++polylines;
  }
  EXPECT_EQ(polylines, 4u);  // loss and grad_norm of each run
  EXPECT_NE(text.find(">grad_norm</text>"), std::string::npos);
  EXPECT_EQ(text.find("stroke=\"red\""), std::string::npos);  // nothing diverged
  EXPECT_NE(text.find("runA"), std::string::npos);
  EXPECT_NE(text.find("runB"), std::string::npos);
}

TEST_F(CompareTest, OneStepOffByMoreThanRtolDivergesAndNamesTheStep) {
  FakeRun off{kLosses};
  off.losses[2] *= 1 + 1e-3;
  off.losses[3] *= 1 + 1e-3;
  auto a = write_run(root_, "runA", {kLosses});
  auto b = write_run(root_, "runB", off);
  auto r = compare(a, b, "--plot " + (root_ / "p.svg").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("first step past rtol 0.0001 (loss) or 0.0001 (grad_norm) is step 3"),
            std::string::npos)
      << r.output;
  std::ifstream svg(root_ / "p.svg");
  const std::string text((std::istreambuf_iterator<char>(svg)), {});
  EXPECT_NE(text.find("first step past tolerance: 3"), std::string::npos);
  EXPECT_NE(text.find("stroke=\"red\""), std::string::npos);
  EXPECT_FALSE(fs::exists(b / "loss_compare.svg"));
  // A looser tolerance accepts the same runs.
  EXPECT_EQ(compare(a, b, "--rtol=2e-3").exit_code, 0);
}

// A gradient scaled by a constant (e.g. averaged where it should be summed) leaves AdamW's
// losses unchanged: only the gradient norm shows it, with its own tolerance.
TEST_F(CompareTest, AGradientNormOffWithEqualLossesDiverges) {
  FakeRun scaled{kLosses};
  scaled.grad_scale = 0.5;
  auto a = write_run(root_, "runA", {kLosses});
  auto b = write_run(root_, "runB", scaled);
  auto r = compare(a, b);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("grad_norm > grad_rtol"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("is step 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("grad_norm 5.000e-01 at step 1"), std::string::npos) << r.output;
  EXPECT_EQ(compare(a, b, "--grad_rtol 0.6").exit_code, 0);
  EXPECT_EQ(compare(a, b, "--rtol 0.6").exit_code, 0);  // --grad_rtol defaults to --rtol
  EXPECT_EQ(compare(a, b, "--rtol 0.6 --grad_rtol 1e-4").exit_code, 1);
}

TEST_F(CompareTest, DifferentTokensPerStepIsRefusedUnlessForced) {
  FakeRun other{kLosses};
  other.tokens_per_step = 4096;
  auto a = write_run(root_, "runA", {kLosses});
  auto b = write_run(root_, "runB", other);
  auto r = compare(a, b);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("data.tokens_per_step"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2048"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("4096"), std::string::npos) << r.output;
  r = compare(a, b, "--force");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning"), std::string::npos) << r.output;

  FakeRun diverged = other;
  diverged.losses[4] = 5.0;
  auto c = write_run(root_, "runC", diverged);
  EXPECT_EQ(compare(a, c, "--force").exit_code, 1);
}

// The best practices' anti-pattern: more than one of model, batch, sequence and layout changed at
// once (here the sequence halved with the batch doubled, same tokens per step, and the layout).
TEST_F(CompareTest, SeveralVariablesChangedAtOnceWarns) {
  FakeRun other{kLosses};
  other.seq_len = 32;
  other.layout = "pp 1 x dp_replicate 1 x dp_shard 1 x cp 1 x tp 2 (world 2)";
  auto a = write_run(root_, "runA", {kLosses});
  auto b = write_run(root_, "runB", other);
  auto r = compare(a, b);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: batch, sequence, layout all changed"), std::string::npos)
      << r.output;
  FakeRun layout_only{kLosses};
  layout_only.layout = other.layout;
  auto c = write_run(root_, "runC", layout_only);
  r = compare(a, c);
  EXPECT_EQ(r.output.find("changed between the runs"), std::string::npos) << r.output;
}

TEST_F(CompareTest, DifferentModelDataOrTokenizerIsRefused) {
  FakeRun data{kLosses}, tok{kLosses}, model{kLosses};
  data.sha256 = "cd34";
  tok.tokenizer = "hf:/x/tokenizer.json";
  model.flavor = "8B";
  auto a = write_run(root_, "runA", {kLosses});
  auto r = compare(a, write_run(root_, "data", data));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("sha256"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cd34"), std::string::npos) << r.output;
  r = compare(a, write_run(root_, "tok", tok));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("hf:/x/tokenizer.json"), std::string::npos) << r.output;
  r = compare(a, write_run(root_, "model", model));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("model.flavor"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("8B"), std::string::npos) << r.output;
}

TEST_F(CompareTest, MalformedLineIsNamedWithFileAndLine) {
  auto a = write_run(root_, "runA", {kLosses});
  auto b = write_run(root_, "runB", {kLosses});
  std::ofstream(b / "metrics.jsonl", std::ios::app) << "{\"step\": 6, \"loss\": 4.2\n";
  auto r = compare(a, b);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find((b / "metrics.jsonl").string() + ":6"), std::string::npos) << r.output;
  EXPECT_THROW(tools::read_run(b), DataError);
}

TEST_F(CompareTest, BadInputExitsTwo) {
  auto a = write_run(root_, "runA", {kLosses});
  EXPECT_EQ(compare(a, root_ / "missing").exit_code, 2);
  auto b = write_run(root_, "runB", {kLosses});
  fs::remove(b / "run_manifest.json");
  auto r = compare(a, b);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("run_manifest.json"), std::string::npos) << r.output;
  EXPECT_EQ(run_command(testing::titan_binary() + " compare " + a.string()).exit_code, 2);
  EXPECT_EQ(compare(a, a, "--rtol -1").exit_code, 2);
}

TEST_F(CompareTest, NoCommonStepIsAnError) {
  auto a = write_run(root_, "runA", {kLosses});
  auto b = write_run(root_, "runB", {kLosses});
  std::ofstream(b / "metrics.jsonl") << "{\"step\": 100, \"loss\": 1.0, \"grad_norm\": 1.0}\n";
  auto r = compare(a, b);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no logged step in common"), std::string::npos) << r.output;
}

TEST(Compare, RelativeDifference) {
  EXPECT_DOUBLE_EQ(tools::relative_difference(2.0, 2.5), 0.25);
  EXPECT_DOUBLE_EQ(tools::relative_difference(-2.0, -1.5), 0.25);
  EXPECT_EQ(tools::relative_difference(0.0, 0.0), 0.0);
  EXPECT_TRUE(std::isinf(tools::relative_difference(0.0, 1e-9)));
  EXPECT_TRUE(std::isinf(tools::relative_difference(NAN, NAN)));
  EXPECT_TRUE(std::isinf(tools::relative_difference(1.0, INFINITY)));
}

TEST_F(CompareTest, ComparesOnlyCommonStepsAndKeepsTheLastRecordOfAStep) {
  auto a = write_run(root_, "runA", {kLosses});
  auto b = write_run(root_, "runB", {{7.5, 6.25, 5.125}});
  // A resumed run logs step 3 again: the later record wins. A NaN loss is written as null.
  std::ofstream(b / "metrics.jsonl", std::ios::app)
      << "{\"step\": 3, \"loss\": 5.0, \"grad_norm\": 0.25}\n"
      << "{\"step\": 7, \"loss\": null, \"grad_norm\": null}\n";
  auto run_b = tools::read_run(b);
  ASSERT_EQ(run_b.points.size(), 4u);
  EXPECT_EQ(run_b.points[2].loss, 5.0);
  EXPECT_EQ(run_b.points[2].grad_norm, 0.25);
  EXPECT_TRUE(std::isnan(run_b.points[3].loss));
  auto c = tools::compare_runs(tools::read_run(a), run_b, 1e-4, 1e-4);
  ASSERT_EQ(c.steps.size(), 3u);
  EXPECT_EQ(c.only_in_a, 2);
  EXPECT_EQ(c.only_in_b, 1);
  ASSERT_TRUE(c.first_bad_step.has_value());
  EXPECT_EQ(*c.first_bad_step, 3);
  EXPECT_EQ(c.max_loss_diff.step, 3);
  EXPECT_NEAR(c.max_loss_diff.value, 0.125 / 5.125, 1e-12);
  EXPECT_NEAR(c.max_grad_norm_diff.value, (1.0 / 3.0 - 0.25) / (1.0 / 3.0), 1e-12);
}

}  // namespace unit_tools_compare_test
}  // namespace titan
