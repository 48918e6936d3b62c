#include "model/weight_map.h"

#include <cstring>

namespace fovea {

std::string pick_name(const SafetensorsSet& set, std::initializer_list<std::string> names) {
  for (const auto& n : names)
    if (set.has(n)) return n;
  return *names.begin();
}

Tensor concat_rows(const std::vector<Tensor>& parts, const std::string& what) {
  return stack_rows(std::vector<WeightRef>(parts.begin(), parts.end()), what).load();
}

Tensor regroup_internlm2_wqkv(const Tensor& wqkv, const LlmConfig& llm) {
  const int64_t d = llm.head_dim, kv = llm.kv_heads, q_per_kv = llm.heads / llm.kv_heads;
  const int64_t cols = wqkv.dim(1);
  const size_t row_bytes = size_t(cols) * dtype_size(wqkv.dtype);
  const size_t head_bytes = size_t(d) * row_bytes;
  Tensor out = Tensor::host(wqkv.dtype, wqkv.shape);
  const char* src = wqkv.ptr<const char>();
  char* dst = out.ptr<char>();
  for (int64_t g = 0; g < kv; ++g) {
    const char* group = src + size_t(g * (q_per_kv + 2)) * head_bytes;
    for (int64_t j = 0; j < q_per_kv; ++j)  // q head g*q_per_kv + j
      std::memcpy(dst + size_t(g * q_per_kv + j) * head_bytes, group + size_t(j) * head_bytes, head_bytes);
    std::memcpy(dst + size_t(llm.heads + g) * head_bytes, group + size_t(q_per_kv) * head_bytes, head_bytes);
    std::memcpy(dst + size_t(llm.heads + kv + g) * head_bytes, group + size_t(q_per_kv + 1) * head_bytes, head_bytes);
  }
  return out;
}

}  // namespace fovea
