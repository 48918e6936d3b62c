#include <gtest/gtest.h>

#include "server/http_message.h"

namespace fovea::http {
namespace {

using State = RequestParser::State;

TEST(HttpParser, ContentLengthBodyArrivingInPieces) {
  RequestParser parser;
  std::string buffer = "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n";
  EXPECT_EQ(parser.feed(buffer), State::NeedMore);
  buffer += "X-Thing:  spaced  \r\n\r\nhello";
  EXPECT_EQ(parser.feed(buffer), State::NeedMore);
  EXPECT_TRUE(parser.headers_done());
  buffer += " world";
  ASSERT_EQ(parser.feed(buffer), State::Done);
  const Request& r = parser.request();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/v1/chat/completions");
  EXPECT_EQ(r.query, "x=1");
  EXPECT_EQ(r.header("x-thing"), "spaced");
  EXPECT_EQ(r.header("host"), "a");
  EXPECT_EQ(r.body, "hello world");
  EXPECT_TRUE(r.keep_alive);
  EXPECT_TRUE(buffer.empty());
}

TEST(HttpParser, PipelinedRequestsStayInTheBuffer) {
  RequestParser parser;
  std::string buffer = "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(parser.feed(buffer), State::Done);
  EXPECT_EQ(parser.request().path, "/a");
  parser.reset();
  ASSERT_EQ(parser.feed(buffer), State::Done);
  EXPECT_EQ(parser.request().path, "/b");
  EXPECT_FALSE(parser.request().keep_alive);
  EXPECT_TRUE(buffer.empty());
}

TEST(HttpParser, ChunkedBodyWithExtensionsAndTrailers) {
  RequestParser parser;
  std::string buffer = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n";
  EXPECT_EQ(parser.feed(buffer), State::NeedMore);
  buffer += "6\r\n world\r\n0\r\nTrailer: x\r\n";
  EXPECT_EQ(parser.feed(buffer), State::NeedMore);
  buffer += "\r\nNEXT";
  ASSERT_EQ(parser.feed(buffer), State::Done);
  EXPECT_EQ(parser.request().body, "hello world");
  EXPECT_EQ(buffer, "NEXT");
}

TEST(HttpParser, ChunkedBodyOneByteAtATime) {
  RequestParser parser;
  const std::string wire = "POST /x HTTP/1.1\r\ntransfer-encoding: Chunked\r\n\r\na\r\n0123456789\r\n1\r\n!\r\n0\r\n\r\n";
  std::string buffer;
  State state = State::NeedMore;
  for (char c : wire) {
    ASSERT_EQ(state, State::NeedMore);
    buffer += c;
    state = parser.feed(buffer);
  }
  ASSERT_EQ(state, State::Done);
  EXPECT_EQ(parser.request().body, "0123456789!");
}

TEST(HttpParser, LimitsAndMalformedInput) {
  Limits limits;
  limits.max_header_bytes = 90;
  limits.max_body_bytes = 10;
  struct Case {
    std::string wire;
    int status;
  } cases[] = {
      {"GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n", 431},
      {"GET / HTTP/1.1\r\nX: " + std::string(100, 'a'), 431},  // still no end of headers
      {"POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", 413},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n", 413},
      {"POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET /\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400},
      {"G@T / HTTP/1.1\r\n\r\n", 400},
      // A bare LF fails at once: it used to wait for a CRLF until the request timed out (408 after 30 s).
      {"GET / HTTP/1.1\n\n", 400},
      {"GET / HTTP/1.1\nHost: x\n", 400},
      {"GET / HTTP/1.1\r\nHost: x\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\na", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nX: y\n", 400},
  };
  for (const auto& c : cases) {
    RequestParser parser(limits);
    std::string buffer = c.wire;
    EXPECT_EQ(parser.feed(buffer), State::Error) << c.wire;
    EXPECT_EQ(parser.error_status(), c.status) << c.wire;
  }
}

TEST(HttpParser, ConnectionSemanticsAndExpectContinue) {
  RequestParser parser;
  std::string buffer = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_EQ(parser.feed(buffer), State::Done);
  EXPECT_FALSE(parser.request().keep_alive);
  parser.reset();
  buffer = "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n";
  ASSERT_EQ(parser.feed(buffer), State::Done);
  EXPECT_TRUE(parser.request().keep_alive);
  parser.reset();
  buffer = "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n";
  EXPECT_EQ(parser.feed(buffer), State::NeedMore);
  EXPECT_TRUE(parser.expects_continue());
}

TEST(HttpFraming, ResponsesChunksAndEvents) {
  const std::string r = format_response(404, "application/json", "{}", true, {"X-A: b"});
  EXPECT_EQ(r, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nConnection: keep-alive\r\nX-A: b\r\n"
               "Content-Length: 2\r\n\r\n{}");
  const std::string head = format_chunked_head(200, "text/event-stream", false);
  EXPECT_NE(head.find("Transfer-Encoding: chunked\r\n\r\n"), std::string::npos);
  EXPECT_NE(head.find("Connection: close"), std::string::npos);
  EXPECT_EQ(format_chunk(std::string(26, 'x')), "1a\r\n" + std::string(26, 'x') + "\r\n");
  EXPECT_EQ(format_chunk(""), "");
  EXPECT_EQ(sse_event("{\"a\":1}"), "data: {\"a\":1}\n\n");

  // What we frame, our own parser reads back.
  RequestParser parser;
  std::string wire = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + format_chunk(sse_event("[DONE]")) +
                     chunk_terminator();
  ASSERT_EQ(parser.feed(wire), State::Done);
  EXPECT_EQ(parser.request().body, "data: [DONE]\n\n");
}

}  // namespace
}  // namespace fovea::http
