// OpenAI-style chat `messages` inside a job: the `messages` field of a tasks line (jobs/batch_tasks.h), the body
// of an OpenAI batch line (jobs/openai_batch.h) and Python's Request(messages=...) are read by the server's own
// parser (openai/protocol.h), so they mean what they mean to `fovea serve`; their images load the way the job's
// other images do.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "fovea/request.h"
#include "openai/protocol.h"

namespace fovea {

struct JobContext;

// The first http(s):// or s3:// image_url of `messages` (a JSON array), in the order the parser loads them: the
// one a job downloads ahead through its prefetcher. "" when there is none.
std::string first_remote_image(const nlohmann::json& messages);

// Reads `messages_json` (a JSON array of messages) into request->system, ->prompt and ->images (appended; a URL
// image is labelled with its redacted URL), loading each image_url through `load`. False with *error (code
// "invalid_image" for an image that could not be had) on a bad message or image.
bool read_chat_messages(const std::string& messages_json, const openai::MediaLoader& load, Request* request,
                        openai::ApiError* error);

// The image loader of a job item: `prefetch_url` (the item's first remote image) from the prefetcher's download,
// any other http(s):// or s3:// URL (and a retry's) fetched with the job's fetch options; data: URLs decoded;
// local paths, file:// URLs and plain relative paths (through `resolve_relative`) read with the image size limit.
openai::MediaLoader job_image_loader(const JobContext& context, const std::string& prefetch_url,
                                     std::function<std::string(const std::string&)> resolve_relative);

}  // namespace fovea
