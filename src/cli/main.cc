// fovea: one binary, one subcommand per cmd_*.cc file in this folder.
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "cli/command.h"
#include "core/error.h"

namespace fovea {
namespace {
struct Entry {
  std::string summary;
  CommandMain main;
};
std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> commands;
  return commands;
}
}  // namespace

CommandRegistration::CommandRegistration(const char* name, const char* summary, CommandMain main) {
  registry()[name] = Entry{summary, std::move(main)};
}

}  // namespace fovea

int main(int argc, char** argv) {
  auto& commands = fovea::registry();
  const std::string name = argc > 1 ? argv[1] : "";
  const auto it = commands.find(name);
  if (it == commands.end()) {
    std::fprintf(stderr, "usage: fovea COMMAND [options]\n\ncommands:\n");
    for (const auto& [n, e] : commands) std::fprintf(stderr, "  %-16s %s\n", n.c_str(), e.summary.c_str());
    return name.empty() || name == "--help" || name == "help" ? 0 : 2;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    return it->second.main(args);
  } catch (const fovea::UsageError& e) {
    std::fprintf(stderr, "fovea %s: %s\n", name.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fovea %s: error: %s\n", name.c_str(), e.what());
    return 1;
  }
}
