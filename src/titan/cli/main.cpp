#include <fmt/format.h>

#include <functional>
#include <iostream>
#include <map>

#include "titan/cli/commands.h"
#include "titan/cli/flags.h"
#include "titan/distributed/launcher.h"
#include "titan/errors.h"

namespace titan::cli {
namespace {

struct Command {
  std::function<int(const Args&)> run;
  const char* summary;
};

const std::map<std::string, Command>& commands() {
  static const std::map<std::string, Command> table = {
      {"train", {train_command, "train one rank (started by run_train.sh, torchrun, srun...)"}},
      {"launch", {launch_command, "start NGPU workers on this node (what run_train.sh runs)"}},
      {"config", {config_command, "print the resolved config as TOML"}},
      {"comm-check", {comm_check_command, "check that all ranks reach each other (one worker)"}},
      {"generate", {generate_command, "continue or score a prompt with a titan checkpoint or a Hugging Face model"}},
      {"tokenize", {tokenize_command, "print the token ids of a text as a JSON array"}},
      {"convert", {convert_command, "convert between titan checkpoints and Hugging Face folders"}},
      {"compare", {compare_command, "compare two runs' losses step by step, plot both curves"}},
      {"validate", {validate_command, "run a config for a few eager steps, resume it, check it"}},
      {"plan", {plan_command, "propose layouts for a model on N ranks of a device, with memory"}},
  };
  return table;
}

void usage(std::ostream& out) {
  out << "Usage: titan <command> [args]\n\nCommands:\n";
  for (const auto& [name, cmd] : commands()) {
    out << fmt::format("  {:<10} {}\n", name, cmd.summary);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(std::cerr);
    return 2;
  }
  Args args(argv + 2, argv + argc);
  std::string name = argv[1];
  if (name == "help" && !args.empty()) {  // `titan help plan`: `titan plan --help`
    name = args[0];
    args = {"--help"};
  } else if (name == "--help" || name == "-h" || name == "help") {
    usage(std::cout);
    return 0;
  }
  auto it = commands().find(name);
  if (it == commands().end()) {
    std::cerr << "titan: unknown command '" << name << "'\n";
    usage(std::cerr);
    return 2;
  }
  try {
    return it->second.run(args);
  } catch (const HelpShown&) {
    return 0;
  } catch (const ConfigError& e) {
    std::cerr << "config error: " << e.what() << "\n";
    return distributed::kConfigErrorExitCode;
  } catch (const CommError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return distributed::kPeerFailedExitCode;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace titan::cli
