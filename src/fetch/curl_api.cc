#include "fetch/curl_api.h"

#include <dlfcn.h>

#include <cstdlib>

#include <string>

#include "fetch/fetch.h"

namespace fovea {
namespace {

struct Loaded {
  CurlApi api{};
  std::string error;  // non-empty: not usable
};

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* out, std::string* error) {
  *out = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (*out == nullptr && error->empty()) *error = std::string("libcurl lacks ") + name;
  return *out != nullptr;
}

Loaded load() {
  Loaded l;
  void* lib = nullptr;
  for (const char* name : {"libcurl.so.4", "libcurl.so", "libcurl-gnutls.so.4"}) {
    lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
  }
  if (lib == nullptr) {
    l.error = "URL images need libcurl, which is not installed (Debian/Ubuntu: apt-get install libcurl4)";
    return l;
  }
  CurlApi& a = l.api;
  resolve(lib, "curl_global_init", &a.global_init, &l.error);
  resolve(lib, "curl_share_init", &a.share_init, &l.error);
  resolve(lib, "curl_share_setopt", &a.share_setopt, &l.error);
  resolve(lib, "curl_easy_init", &a.easy_init, &l.error);
  resolve(lib, "curl_easy_cleanup", &a.easy_cleanup, &l.error);
  resolve(lib, "curl_easy_reset", &a.easy_reset, &l.error);
  resolve(lib, "curl_easy_setopt", &a.easy_setopt, &l.error);
  resolve(lib, "curl_easy_perform", &a.easy_perform, &l.error);
  resolve(lib, "curl_easy_getinfo", &a.easy_getinfo, &l.error);
  resolve(lib, "curl_easy_strerror", &a.easy_strerror, &l.error);
  resolve(lib, "curl_slist_append", &a.slist_append, &l.error);
  resolve(lib, "curl_slist_free_all", &a.slist_free_all, &l.error);
  resolve(lib, "curl_version_info", &a.version_info, &l.error);
  if (!l.error.empty()) return l;
  // SigV4 signing (CURLOPT_AWS_SIGV4) arrived in 7.75.
  const curl_version_info_data* v = a.version_info(CURLVERSION_NOW);
  if (v == nullptr || v->version_num < 0x074b00) {
    l.error = std::string("URL images need libcurl >= 7.75; found ") + (v ? v->version : "an unknown version");
    return l;
  }
  if (a.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) l.error = "libcurl failed to initialise";
  return l;
}

}  // namespace

const CurlApi& curl_api() {
  static const Loaded loaded = load();  // thread-safe once
  if (!loaded.error.empty()) throw FetchError(loaded.error, false);
  return loaded.api;
}

// The _STR options need libcurl 7.85; older ones (a machine's own libcurl, loaded at run time) take the
// deprecated bit masks.
void limit_to_http(const CurlApi& api, CURL* curl) {
  if (api.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
      api.easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") == CURLE_OK)
    return;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  api.easy_setopt(curl, CURLOPT_PROTOCOLS, long(CURLPROTO_HTTP | CURLPROTO_HTTPS));
  api.easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS, long(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#pragma GCC diagnostic pop
}

std::string ca_bundle(const std::string& option) {
  if (!option.empty()) return option;
  for (const char* name : {"FOVEA_CA_BUNDLE", "CURL_CA_BUNDLE"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return v;
  }
  return "";
}

}  // namespace fovea
