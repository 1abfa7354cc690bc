#include <iostream>

#include "titan/cli/commands.h"
#include "titan/config/resolve.h"

namespace titan::cli {

int config_command(const Args& args) {
  auto config = config::resolve(config::parse_command_line(args));
  std::cout << config::to_toml(config);
  return 0;
}

}  // namespace titan::cli
