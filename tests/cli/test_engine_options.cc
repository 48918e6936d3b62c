// The engine options of run / serve / bench: one table, every row parsed into its EngineConfig field, named as
// the Python keyword, and shown in the usage.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "cli/engine_options.h"

namespace fovea {
namespace {

EngineConfig parse(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"--model", "m"});
  const Args args(argv);
  args.allow_only(engine_option_flags());
  return parse_engine_options(args);
}

// A value the option accepts other than its default.
std::string sample_value(const EngineOption& o) {
  if (std::holds_alternative<int EngineConfig::*>(o.member)) return std::to_string(std::max(7, o.min));
  if (o.check_choices) return std::string(o.value).substr(std::string(o.value).rfind('|') + 1);
  return "some-value";
}

TEST(EngineOptions, EveryRowSetsItsFieldAndNothingElse) {
  for (const EngineOption& o : engine_options()) {
    if (std::string(o.flag) == "--model") continue;
    SCOPED_TRACE(o.flag);
    const bool is_switch = *o.value == '\0';
    const EngineConfig c = is_switch ? parse({o.flag}) : parse({o.flag, sample_value(o)});
    EngineConfig expected;
    expected.model_dir = "m";
    if (auto* s = std::get_if<std::string EngineConfig::*>(&o.member)) expected.*(*s) = sample_value(o);
    if (auto* n = std::get_if<int EngineConfig::*>(&o.member)) expected.*(*n) = std::stoi(sample_value(o));
    if (auto* b = std::get_if<bool EngineConfig::*>(&o.member)) {
      EXPECT_NE(EngineConfig{}.*(*b), o.switch_sets) << "a switch that sets the default does nothing";
      expected.*(*b) = o.switch_sets;
    }
    // Every field compared, so a row that writes the wrong member fails here.
    for (const EngineOption& other : engine_options()) {
      std::visit([&](auto member) { EXPECT_EQ(c.*member, expected.*member) << other.field; }, other.member);
    }
  }
}

// fovea.Engine takes EngineConfig fields as keywords; the flag is the same name (dashes for underscores, --no-
// for a field that defaults to true), except the two named here.
TEST(EngineOptions, FlagsAreTheFieldNames) {
  std::set<std::string> fields;
  for (const EngineOption& o : engine_options()) {
    SCOPED_TRACE(o.flag);
    EXPECT_TRUE(fields.insert(o.field).second) << "two rows for " << o.field;
    std::string name = o.field;
    for (char& c : name)
      if (c == '_') c = '-';
    const std::string flag = o.flag;
    if (flag == "--model" || flag == "--cpu-normalize") continue;
    EXPECT_EQ(flag, (o.switch_sets ? "--" : "--no-") + name);
  }
}

TEST(EngineOptions, UsageShowsEveryFlagAndDefault) {
  const std::string usage = engine_options_usage();
  for (const std::string& flag : engine_option_flags()) EXPECT_NE(usage.find(flag + " "), std::string::npos) << flag;
  EXPECT_NE(usage.find("(default 16384)"), std::string::npos) << usage;  // max_step_tokens' default
  EXPECT_NE(usage.find("[gpu_normalize=False]"), std::string::npos) << usage;
}

TEST(EngineOptions, BadValuesAreUsageErrors) {
  EXPECT_THROW(parse({"--replicas", "0"}), UsageError);
  EXPECT_THROW(parse({"--kv-blocks", "-1"}), UsageError);
  EXPECT_THROW(parse({"--block-size", "4"}), UsageError);  // below 8; 8/16/32/64 are checked by the engine
  EXPECT_EQ(parse({"--block-size", "64"}).block_size, 64);
  EXPECT_THROW(parse({"--max-step-tokens", "many"}), UsageError);
  EXPECT_THROW(parse({"--backend", "gpu"}), UsageError);
  EXPECT_THROW(parse({"--no-such-option"}), UsageError);
  EXPECT_THROW(parse_engine_options(Args({"--kv-blocks", "4"})), UsageError);  // no --model
  EXPECT_EQ(parse({"--backend", "cpu"}).backend, "cpu");
}

TEST(EngineOptions, TilingAndItsOlderName) {
  EXPECT_EQ(parse_tiling_options(Args({})).tiling, TilingPolicy::Official);
  EXPECT_EQ(parse_tiling_options(Args({"--tiling", "compact"})).tiling, TilingPolicy::Compact);
  EXPECT_EQ(parse_tiling_options(Args({"--policy", "compact"})).tiling, TilingPolicy::Compact);
  EXPECT_EQ(parse_tiling_options(Args({"--max-tiles", "6"})).max_tiles, 6);
  EXPECT_THROW(parse_tiling_options(Args({"--tiling", "odd"})), UsageError);
  EXPECT_THROW(parse_tiling_options(Args({"--max-tiles", "-1"})), UsageError);
}

}  // namespace
}  // namespace fovea
