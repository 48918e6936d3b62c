// The comparison point for the HTTP server decision (docs/components/interfaces.md, "HTTP server"): Debian's cpp-httplib
// (libcpp-httplib-dev) configured like `fovea serve` — 256 handler threads, 64 MiB bodies, 60 s read timeout —
// answering /health and a chat route that holds its thread for a while as an engine request would. Not part
// of the product; slow_clients.py attacks it and fovea serve alike.
// Build: g++ -O2 -std=c++17 bench/reliability/httplib_probe_server.cc -o /tmp/httplib_probe -pthread
// Run:   /tmp/httplib_probe PORT
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  const int port = argc > 1 ? std::atoi(argv[1]) : 8100;
  httplib::Server server;
  server.new_task_queue = [] { return new httplib::ThreadPool(256); };
  server.set_payload_max_length(64ull << 20);
  server.set_read_timeout(60, 0);
  server.set_write_timeout(30, 0);
  server.set_keep_alive_timeout(60);
  static std::atomic<int> finished{0};
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  // Stands in for an engine request: 2 s of waiting, with no way to learn that the client left.
  server.Post("/v1/chat/completions", [](const httplib::Request&, httplib::Response& res) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    finished++;
    res.set_content(R"({"choices":[]})", "application/json");
  });
  server.Get("/finished", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::to_string(finished.load()), "text/plain");
  });
  std::fprintf(stderr, "httplib %s probe on 127.0.0.1:%d\n", CPPHTTPLIB_VERSION, port);
  return server.listen("127.0.0.1", port) ? 0 : 1;
}
