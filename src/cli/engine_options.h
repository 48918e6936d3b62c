// The options of the engine, declared once for every command that loads one (run, serve, bench): one table
// parses them, writes their usage text, and names each after its EngineConfig field, which is also its Python
// keyword (fovea.Engine(kv_blocks=512) is --kv-blocks 512; a field that defaults to true has a --no- switch).
// A new EngineConfig field users tune is one row in engine_options.cc.
#pragma once
#include <string>
#include <variant>
#include <vector>

#include "cli/command.h"
#include "fovea/options.h"
#include "fovea/request.h"

namespace fovea {

struct EngineOption {
  const char* flag;   // "--kv-blocks"
  const char* field;  // the EngineConfig member and Python keyword: "kv_blocks"
  std::variant<std::string EngineConfig::*, int EngineConfig::*, bool EngineConfig::*> member;
  const char* value;  // the value's placeholder in the usage ("N", "cpu|cuda|auto"); "" for a switch
  const char* help;
  bool switch_sets = true;     // a switch's value (--no-cuda-graphs sets cuda_graphs to false)
  int min = 0;                 // an integer's smallest value
  bool check_choices = false;  // the value must be one of value's '|'-separated words
};

const std::vector<EngineOption>& engine_options();

// What a command applies to requests that do not say: the tiling policy and tile limit (Request::tiling,
// Request::max_tiles; Python: Engine(tiling=..., max_tiles=...)).
struct TilingOptions {
  TilingPolicy tiling = TilingPolicy::Official;
  int max_tiles = 0;  // 0: the model's max_dynamic_patch
};

// Every flag of engine_options() and of the tiling options, for Args::allow_only.
std::vector<std::string> engine_option_flags();
// The EngineConfig the command line asks for (--model is required). Throws UsageError.
EngineConfig parse_engine_options(const Args& args);
TilingOptions parse_tiling_options(const Args& args);
// One line per option, with the defaults of EngineConfig{}; the commands print it below their own options.
std::string engine_options_usage();

}  // namespace fovea
