#include <gtest/gtest.h>

#include "server/metrics.h"

namespace fovea {
namespace {

TEST(Metrics, EachEngineHasItsOwnLabelledSeries) {
  EngineStats s;
  EXPECT_EQ(render_metrics(s, ServerCounters{}).find("fovea_engine_up"), std::string::npos);  // a lone engine
  EngineStats a, b;
  a.engine = "cuda:0";
  a.requests_finished = 7;
  b.engine = "cuda:1";
  b.failed = true;
  s.engines = {a, b};
  const std::string text = render_metrics(s, ServerCounters{});
  EXPECT_NE(text.find("fovea_engine_up{engine=\"cuda:0\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("fovea_engine_up{engine=\"cuda:1\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("fovea_engine_requests_finished_total{engine=\"cuda:0\"} 7\n"), std::string::npos);
}

}  // namespace
}  // namespace fovea
