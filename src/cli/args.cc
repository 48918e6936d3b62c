// The command-line reader shared by every subcommand (cli/command.h).
#include <cstdio>
#include <exception>

#include "cli/command.h"

namespace fovea {

int print_usage_error(const char* command, const UsageError& e, const std::string& usage) {
  const std::string message = e.what();
  if (!message.empty()) std::fprintf(stderr, "fovea %s: %s\n", command, message.c_str());
  std::fputs(usage.c_str(), stderr);
  return message.empty() ? 0 : 2;
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
  throw UsageError(str(flag, " needs an integer, got '", v, "'"));
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
  throw UsageError(str(flag, " needs a number, got '", v, "'"));
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
    if (!ok) throw UsageError("unknown option " + f.first);
  }
}

}  // namespace fovea
