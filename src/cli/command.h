// Subcommands register themselves: one file per command, `static const CommandRegistration r{...}`.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace fovea {

using CommandMain = std::function<int(const std::vector<std::string>& args)>;

struct CommandRegistration {
  CommandRegistration(const char* name, const char* summary, CommandMain main);
};

// Tiny argument reader shared by the commands: --flag VALUE, --flag=VALUE, --switch, positionals.
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
