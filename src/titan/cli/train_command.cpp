#include <iostream>

#include "titan/cli/commands.h"
#include "titan/config/resolve.h"

namespace titan::cli {

int train_command(const Args& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << config::help_text();
    return 0;
  }
  auto config = config::resolve(config::parse_command_line(args));
  (void)config;
  return 0;
}

int launch_command(const Args& args) { return train_command(args); }

}  // namespace titan::cli
