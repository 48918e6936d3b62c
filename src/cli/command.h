// Subcommands register themselves: one file per command, `static const CommandRegistration r{...}`.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

namespace fovea {

using CommandMain = std::function<int(const std::vector<std::string>& args)>;

struct CommandRegistration {
  CommandRegistration(const char* name, const char* summary, CommandMain main);
};

// A command line the command cannot run (an unknown option, a missing or malformed value): its message names the
// option, without file:line. main() prints it and exits 2; commands with a usage text print that too
// (print_usage_error). An empty message is --help.
class UsageError : public Error {
 public:
  using Error::Error;
};

// Prints "fovea COMMAND: message" (unless --help) and the usage; returns the exit status: 0 for --help, else 2.
int print_usage_error(const char* command, const UsageError& e, const std::string& usage);

// Tiny argument reader shared by the commands: --flag VALUE, --flag=VALUE, --switch, positionals. Malformed
// values and unknown flags throw UsageError.
class Args {
 public:
  explicit Args(const std::vector<std::string>& args);
  std::string get(const std::string& flag, const std::string& fallback = "") const;
  int get_int(const std::string& flag, int fallback) const;
  double get_double(const std::string& flag, double fallback) const;
  bool has(const std::string& flag) const;  // the flag was given (with or without value)
  std::vector<std::string> get_all(const std::string& flag) const;  // repeated flags
  const std::vector<std::string>& positional() const { return positional_; }
  // Throws on any flag not in `known` (so typos are errors, not silently ignored).
  void allow_only(const std::vector<std::string>& known) const;

 private:
  std::vector<std::pair<std::string, std::string>> flags_;
  std::vector<std::string> positional_;
};

}  // namespace fovea
