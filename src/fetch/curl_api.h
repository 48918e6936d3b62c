// libcurl, loaded at first use (dlopen "libcurl.so.4") rather than linked: the fovea binary then starts on
// machines without libcurl (the GPU machine's carried binary), and only URL images fail there, each with a
// clear error. The headers come from Debian's libcurl4-openssl-dev at build time.
#pragma once
#include <curl/curl.h>

#include <string>

namespace fovea {

struct CurlApi {
  CURLcode (*global_init)(long flags);
  CURLSH* (*share_init)();
  CURLSHcode (*share_setopt)(CURLSH*, CURLSHoption, ...);
  CURL* (*easy_init)();
  void (*easy_cleanup)(CURL*);
  void (*easy_reset)(CURL*);
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
  curl_version_info_data* (*version_info)(CURLversion);
};

// The loaded library (curl_global_init done once). Throws FetchError when libcurl >= 7.75 is not installed.
const CurlApi& curl_api();

// Only http and https, also after redirects (never file://, ftp://, ...).
void limit_to_http(const CurlApi& api, CURL* curl);

// The PEM bundle to verify TLS peers with: `option`, else env FOVEA_CA_BUNDLE or CURL_CA_BUNDLE, else "" (the
// system's). Verification is never switched off.
std::string ca_bundle(const std::string& option);

}  // namespace fovea
