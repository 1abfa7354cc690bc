#include <iostream>

#include "titan/cli/commands.h"
#include "titan/config/resolve.h"

namespace titan::cli {

int config_command(const Args& args) {
  auto cli = config::parse_command_line(args);
  if (cli.help) {
    std::cout << "Usage: titan config [--module M] [--config C] [--section.key value]...\n"
                 "Prints the resolved config as TOML.\n"
              << config::help_text();
    return 0;
  }
  auto config = config::resolve(cli);
  std::cout << config::to_toml(config);
  return 0;
}

}  // namespace titan::cli
