// Typed errors. Every message names what is at fault (key, file, line, rank, tensor)
// and, where it helps, what would be valid. cli/main.cpp maps ConfigError to exit code 2, and
// a training worker (cli/train_command.cpp) DivergedError to 4 (distributed/launcher.h).
#pragma once

#include <stdexcept>
#include <string>

namespace titan {

/// Base of all titan errors.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Invalid configuration: unknown key, wrong type, out of range, impossible combination.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// Invalid or unreadable data: dataset, tokenizer files.
class DataError : public Error {
 public:
  using Error::Error;
};

/// Missing, corrupt or foreign checkpoint / model files.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

/// A training step whose loss or gradient norm is not finite, stopped before its update
/// (training.on_nonfinite = stop): a restart would repeat it, so the launcher does not restart.
class DivergedError : public Error {
 public:
  using Error::Error;
};

/// Collective or rendezvous failure (timeouts name the rank and the operation).
class CommError : public Error {
 public:
  using Error::Error;
};

}  // namespace titan
