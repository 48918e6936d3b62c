// fovea: one binary, one subcommand per file in this folder.
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

Args::Args(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      const auto eq = a.find('=');
      if (eq != std::string::npos) {
        flags_.emplace_back(a.substr(0, eq), a.substr(eq + 1));
      } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
        flags_.emplace_back(a, args[++i]);
      } else {
        flags_.emplace_back(a, "");
      }
    } else {
      positional_.push_back(a);
    }
  }
}

std::string Args::get(const std::string& flag, const std::string& fallback) const {
  for (auto it = flags_.rbegin(); it != flags_.rend(); ++it)
    if (it->first == flag) return it->second;
  return fallback;
}

int Args::get_int(const std::string& flag, int fallback) const {
  if (!has(flag)) return fallback;
  const std::string v = get(flag);
  try {
    size_t used = 0;
    const int n = std::stoi(v, &used);
    if (used == v.size()) return n;
  } catch (const std::exception&) {
  }
  FOVEA_FAIL(flag, " needs an integer, got '", v, "'");
}

double Args::get_double(const std::string& flag, double fallback) const {
  if (!has(flag)) return fallback;
  const std::string v = get(flag);
  try {
    size_t used = 0;
    const double d = std::stod(v, &used);
    if (used == v.size()) return d;
  } catch (const std::exception&) {
  }
  FOVEA_FAIL(flag, " needs a number, got '", v, "'");
}

bool Args::has(const std::string& flag) const {
  for (const auto& f : flags_)
    if (f.first == flag) return true;
  return false;
}

std::vector<std::string> Args::get_all(const std::string& flag) const {
  std::vector<std::string> out;
  for (const auto& f : flags_)
    if (f.first == flag) out.push_back(f.second);
  return out;
}

void Args::allow_only(const std::vector<std::string>& known) const {
  for (const auto& f : flags_) {
    bool ok = false;
    for (const auto& k : known) ok = ok || f.first == k;
    FOVEA_CHECK(ok, "unknown option ", f.first);
  }
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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fovea %s: error: %s\n", name.c_str(), e.what());
    return 1;
  }
}
