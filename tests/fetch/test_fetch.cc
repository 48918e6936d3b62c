// fetch_bytes and the Prefetcher against our own loopback HTTP server: plain, chunked, redirects, 404 (not
// retried), 503 then 200 (retried), bodies over the limit with and without Content-Length, a server too slow,
// and the prefetch window's bound. HTTPS and S3 are tested end to end in tests/python/test_fetch_remote.py.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "fetch/fetch.h"
#include "fetch/prefetch.h"
#include "server/http_server.h"

namespace fovea {
namespace {

TEST(FetchUrl, RecognisesSchemesAndRedactsSecrets) {
  EXPECT_TRUE(is_fetch_url("https://h/x"));
  EXPECT_TRUE(is_fetch_url("HTTP://h/x"));
  EXPECT_TRUE(is_fetch_url("s3://b/k"));
  EXPECT_FALSE(is_fetch_url("file:///x"));
  EXPECT_FALSE(is_fetch_url("/tmp/http://x"));
  EXPECT_EQ(redact_url("https://user:pw@host:8/a/b.png?X-Amz-Signature=s#f"), "https://host:8/a/b.png?...");
  EXPECT_EQ(redact_url("http://host"), "http://host");
  EXPECT_EQ(redact_url("s3://bucket/k.png"), "s3://bucket/k.png");
}

TEST(FetchUrl, RefusesOtherSchemesAndBadS3Urls) {
  EXPECT_THROW(fetch_bytes("ftp://host/x"), FetchError);
  EXPECT_THROW(fetch_bytes("s3://bucket"), FetchError);
}

class LocalServer : public ::testing::Test {
 protected:
  void SetUp() override {
    http::ServerOptions options;
    options.port = 0;
    options.handler_threads = 8;
    server_ = std::make_unique<http::Server>(options, [this](http::Exchange& ex) { handle(ex); });
    server_->start();
    base_ = "http://127.0.0.1:" + std::to_string(server_->port());
    fast_.retries = 2;
    fast_.backoff_ms = 10;
    fast_.timeout_ms = 5000;
  }
  void TearDown() override { server_->stop(); }

  void handle(http::Exchange& ex) {
    const std::string& path = ex.request().path;
    hits_++;
    const int now = ++active_;
    for (int seen = max_active_; now > seen && !max_active_.compare_exchange_weak(seen, now);) {
    }
    if (path == "/img") {
      ex.respond(200, "image/png", image_);
    } else if (path == "/chunked") {  // no Content-Length
      ex.begin_stream(200, "image/png");
      ex.write_chunk(image_.substr(0, 1000));
      ex.write_chunk(image_.substr(1000));
      ex.end_stream();
    } else if (path == "/moved") {
      ex.respond(302, "", "", {"Location: /img"});
    } else if (path == "/flaky") {  // 503 twice, then the image
      if (++flaky_ <= 2) ex.respond(503, "text/plain", "busy");
      else ex.respond(200, "image/png", image_);
    } else if (path == "/down") {
      ex.respond(503, "text/plain", "down");
    } else if (path.rfind("/slow", 0) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      // Done before the reply leaves: a client that got it may start its next fetch before this handler would
      // otherwise have counted itself out, which read as one download too many.
      --active_;
      ex.respond(200, "image/png", image_);
      return;
    } else {
      ex.respond(404, "text/plain", "no");
    }
    --active_;
  }

  std::unique_ptr<http::Server> server_;
  std::string base_;
  const std::string image_ = std::string(5000, 'i');
  FetchOptions fast_;
  std::atomic<int> hits_{0}, flaky_{0}, active_{0}, max_active_{0};
};

TEST_F(LocalServer, FetchesPlainChunkedAndRedirected) {
  EXPECT_EQ(fetch_bytes(base_ + "/img", fast_), image_);
  EXPECT_EQ(fetch_bytes(base_ + "/chunked", fast_), image_);
  EXPECT_EQ(fetch_bytes(base_ + "/moved", fast_), image_);
  FetchOptions no_redirects = fast_;
  no_redirects.max_redirects = 0;
  EXPECT_THROW(fetch_bytes(base_ + "/moved", no_redirects), FetchError);
}

TEST_F(LocalServer, NotFoundFailsAtOnceWithTheUrl) {
  try {
    fetch_bytes(base_ + "/missing.png?token=secret", fast_);
    FAIL() << "404 must throw";
  } catch (const FetchError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(base_ + "/missing.png?..."), std::string::npos) << m;
    EXPECT_NE(m.find("HTTP 404"), std::string::npos) << m;
    EXPECT_EQ(m.find("secret"), std::string::npos) << m;
    EXPECT_FALSE(e.retryable());
  }
  EXPECT_EQ(hits_, 1);  // 4xx is never retried
}

TEST_F(LocalServer, ServerErrorsAreRetriedWithBackoff) {
  EXPECT_EQ(fetch_bytes(base_ + "/flaky", fast_), image_);
  EXPECT_EQ(flaky_, 3);
  hits_ = 0;
  try {
    fetch_bytes(base_ + "/down", fast_);
    FAIL() << "503 every time must throw";
  } catch (const FetchError& e) {
    EXPECT_NE(std::string(e.what()).find("HTTP 503 (after 3 attempts)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(hits_, 3);
}

TEST_F(LocalServer, BodiesOverTheLimitAreRefused) {
  FetchOptions small = fast_;
  small.max_bytes = 4999;
  for (const char* path : {"/img", "/chunked"}) {  // with and without Content-Length
    try {
      fetch_bytes(base_ + path, small);
      FAIL() << path;
    } catch (const FetchError& e) {
      EXPECT_NE(std::string(e.what()).find("larger than the limit of 4999 bytes"), std::string::npos) << e.what();
    }
  }
  small.max_bytes = 5000;
  EXPECT_EQ(fetch_bytes(base_ + "/chunked", small).size(), 5000u);
}

TEST_F(LocalServer, ASlowServerTimesOut) {
  FetchOptions impatient = fast_;
  impatient.timeout_ms = 100;
  impatient.retries = 1;
  try {
    fetch_bytes(base_ + "/slow", impatient);
    FAIL() << "must time out";
  } catch (const FetchError& e) {
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(after 2 attempts)"), std::string::npos) << e.what();
  }
}

TEST_F(LocalServer, PrefetchStaysInsideItsWindowAndKeepsOrder) {
  std::vector<std::string> urls;
  for (int i = 0; i < 12; ++i) urls.push_back(i % 4 == 3 ? "" : base_ + "/slow?i=" + std::to_string(i));
  urls[5] = base_ + "/missing";
  {
    Prefetcher prefetcher(urls, fast_, /*window=*/3, /*parallel=*/2);
    EXPECT_EQ(prefetcher.take(0).bytes, image_);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    EXPECT_LE(hits_, 3);  // items 0..2 only: the consumer is still at 0
    for (size_t i = 1; i < urls.size(); ++i) {
      const Prefetched p = prefetcher.take(i);
      if (urls[i].empty()) {
        EXPECT_TRUE(p.bytes.empty() && p.error.empty()) << i;
      } else if (i == 5) {
        EXPECT_NE(p.error.find("HTTP 404"), std::string::npos) << p.error;
      } else {
        EXPECT_EQ(p.bytes, image_) << i << " " << p.error;
      }
    }
  }
  EXPECT_LE(max_active_, 2);  // never more than `parallel` downloads at once
}

TEST_F(LocalServer, PrefetchDownloadsInParallelAheadOfTheConsumer) {
  const std::vector<std::string> urls(8, base_ + "/slow");  // 400 ms each: 3.2 s one after the other
  Prefetcher prefetcher(urls, fast_, 8, 4);
  // The consumer is busy (the GPU is working) and takes nothing until the server has answered all 8: the
  // prefetcher fetched them ahead, on its own. (Without prefetching this waits for ever: the bound only turns a
  // hang into a failure, it is no verdict on speed.)
  for (int polls = 0; !(hits_ == 8 && active_ == 0); ++polls) {
    ASSERT_LT(polls, 60000) << "the prefetcher did not fetch ahead: " << hits_ << " of 8 requested";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (size_t i = 0; i < urls.size(); ++i) EXPECT_EQ(prefetcher.take(i).bytes, image_);
  EXPECT_EQ(max_active_, 4);  // 4 at a time
}

TEST_F(LocalServer, DestroyingThePrefetcherCancelsDownloads) {
  std::vector<std::string> urls(8, base_ + "/slow");
  {
    Prefetcher prefetcher(urls, fast_, 8, 1);  // one at a time
    while (hits_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the first download runs
  }
  // Destroyed while the first download ran: it cancelled the rest instead of fetching all 8 first.
  EXPECT_LE(hits_, 2);
}

TEST_F(LocalServer, LimiterBoundsConcurrentFetches) {
  FetchLimiter limiter(2);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i)
    threads.emplace_back([&] { ok += limiter.fetch(base_ + "/slow", fast_) == image_; });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 6);
  EXPECT_LE(max_active_, 2);
}

}  // namespace
}  // namespace fovea
