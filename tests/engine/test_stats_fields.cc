// The EngineStats table (engine/stats_fields.h) covers every member of EngineStats, and every rendering built on
// it shows every field: the JSON of Engine.stats() and `fovea bench`, /metrics (lone engine and per engine) and
// the data-parallel dispatcher's sums.
#include <gtest/gtest.h>

#include <set>
#include <type_traits>

#include "engine/data_parallel.h"
#include "engine/stats_fields.h"
#include "engine/stats_json.h"
#include "server/metrics.h"

namespace fovea {
namespace {

// Counts the members of an aggregate: the most values a braced initialiser takes.
struct AnyValue {
  template <typename T>
  operator T() const;
};
template <typename T, typename... Values>
constexpr size_t aggregate_members() {
  if constexpr (requires { T{Values{}..., AnyValue{}}; }) return aggregate_members<T, Values..., AnyValue>();
  else return sizeof...(Values);
}

// Every field set to a value of its own: numbers (seed + its position) x 1, 2, 3..., flags true, texts its name.
EngineStats distinct_stats(int seed) {
  EngineStats s;
  int position = 0;
  for (const StatField& field : engine_stats_fields()) {
    ++position;
    std::visit(
        [&](auto member) {
          using Value = std::remove_cvref_t<decltype(s.*member)>;
          if constexpr (std::is_same_v<Value, std::string>) s.*member = std::string(field.name) + std::to_string(seed);
          else if constexpr (std::is_same_v<Value, bool>) s.*member = true;
          else s.*member = Value(seed * 100 + position);
        },
        field.member);
  }
  return s;
}

TEST(StatsFields, TheTableNamesEveryMemberOnce) {
  // A member added to EngineStats without a row here fails this (engines is the one member not in the table).
  EXPECT_EQ(aggregate_members<EngineStats>(), engine_stats_fields().size() + 1);
  std::set<std::string> names;
  for (const StatField& field : engine_stats_fields()) {
    EXPECT_TRUE(names.insert(field.name).second) << field.name;
    EXPECT_NE(std::string(field.help), "") << field.name;
    EXPECT_EQ(std::string(field.metric).empty(), field.kind == StatKind::Label) << field.name;
  }
}

TEST(StatsFields, JsonHasEveryFieldWithItsValue) {
  EngineStats s = distinct_stats(1);
  s.engines = {distinct_stats(2)};
  const auto j = stats_json(s);
  for (const StatField& field : engine_stats_fields()) {
    ASSERT_TRUE(j.contains(field.name)) << field.name;
    ASSERT_TRUE(j["engines"][0].contains(field.name)) << field.name;
    if (field.kind == StatKind::Label) {
      EXPECT_EQ(j[field.name], std::string(field.name) + "1");
    } else if (field.kind == StatKind::Health) {
      EXPECT_EQ(j[field.name], true) << field.name;  // a JSON boolean (Python: stats["failed"] is False)
    } else {
      EXPECT_DOUBLE_EQ(j[field.name].get<double>(), stat_number(field, s)) << field.name;
      EXPECT_DOUBLE_EQ(j["engines"][0][field.name].get<double>(), stat_number(field, s.engines[0])) << field.name;
    }
  }
  EXPECT_EQ(j.size(), engine_stats_fields().size() + 1);
}

// The line "series{labels} value" of a metric in the exposition, "" when absent.
std::string metric_line(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return "";
  return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
}

std::string with_engine(const std::string& series, const std::string& engine) {
  const std::string name = "fovea_engine_" + series.substr(std::string("fovea_").size());
  const size_t brace = name.find('{');
  const std::string label = "engine=\"" + engine + "\"";
  return brace == std::string::npos ? name + "{" + label + "}" : name.substr(0, brace + 1) + label + "," + name.substr(brace + 1);
}

TEST(StatsFields, MetricsHaveEveryNumericFieldForTheTotalAndEachEngine) {
  EngineStats s = distinct_stats(1);
  s.engines = {distinct_stats(2), distinct_stats(3)};
  s.engines[1].failed = false;
  const std::string text = render_metrics(s, ServerCounters{});
  char value[64];
  for (const StatField& field : engine_stats_fields()) {
    if (field.kind == StatKind::Label) continue;
    std::snprintf(value, sizeof value, "%.17g", stat_number(field, s) * field.metric_scale);
    EXPECT_EQ(metric_line(text, field.metric), std::string(field.metric) + " " + value) << text;
    for (const EngineStats& engine : s.engines) {
      const std::string series = with_engine(field.metric, engine.engine);
      std::snprintf(value, sizeof value, "%.17g", stat_number(field, engine) * field.metric_scale);
      EXPECT_EQ(metric_line(text, series), series + " " + value) << text;
    }
  }
  EXPECT_NE(text.find("fovea_engine_up{engine=\"engine3\"} 1\n"), std::string::npos) << text;
}

TEST(StatsFields, SumsAndDeltasCoverEveryCounterAndGauge) {
  const EngineStats a = distinct_stats(1), b = distinct_stats(2);
  EngineStats sum = a;
  add_stats(sum, b);
  const EngineStats delta = stats_delta(b, a);
  for (const StatField& field : engine_stats_fields()) {
    if (field.kind == StatKind::Counter || field.kind == StatKind::Gauge)
      EXPECT_DOUBLE_EQ(stat_number(field, sum), stat_number(field, a) + stat_number(field, b)) << field.name;
    const double expected_delta =
        field.kind == StatKind::Counter ? stat_number(field, b) - stat_number(field, a) : stat_number(field, b);
    EXPECT_DOUBLE_EQ(stat_number(field, delta), expected_delta) << field.name;
  }
}

// An engine that only reports stats.
class StatsOnly final : public InferenceService {
 public:
  explicit StatsOnly(EngineStats stats) : stats_(std::move(stats)) {}
  int64_t submit(Request, RequestCallback) override { throw QueueFullError("queue full: stats only"); }
  void cancel(int64_t) override {}
  void drain() override {}
  EngineStats stats() const override { return stats_; }
  std::string model_name() const override { return "stats-only"; }
  std::string token_text(int32_t) const override { return ""; }

 private:
  EngineStats stats_;
};

TEST(StatsFields, TheDispatcherSumsEveryCounterAndGaugeAndKeepsEachEngines) {
  const EngineStats a = distinct_stats(1), b = distinct_stats(2);
  std::vector<std::unique_ptr<InferenceService>> engines;
  engines.push_back(std::make_unique<StatsOnly>(a));
  engines.push_back(std::make_unique<StatsOnly>(b));
  DataParallelService service(std::move(engines), {"cpu#0", "cpu#1"});
  const EngineStats total = service.stats();
  ASSERT_EQ(total.engines.size(), 2u);
  for (const StatField& field : engine_stats_fields()) {
    if (field.kind == StatKind::Counter || field.kind == StatKind::Gauge) {
      EXPECT_DOUBLE_EQ(stat_number(field, total), stat_number(field, a) + stat_number(field, b)) << field.name;
      EXPECT_DOUBLE_EQ(stat_number(field, total.engines[1]), stat_number(field, b)) << field.name;
    }
  }
  EXPECT_EQ(total.engines[0].engine, "cpu#0");
  EXPECT_TRUE(total.failed);  // both report failed
}

}  // namespace
}  // namespace fovea
