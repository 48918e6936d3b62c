#include "model/weight_map.h"

#include <cstring>

namespace fovea {

std::string pick_name(const SafetensorsSet& set, std::initializer_list<std::string> names) {
  for (const auto& n : names)
    if (set.has(n)) return n;
  return *names.begin();
}

Tensor concat_rows(const std::vector<Tensor>& parts, const std::string& what) {
  FOVEA_CHECK(!parts.empty(), what, ": nothing to concatenate");
  const Tensor& first = parts[0];
  Shape shape = first.shape;
  int64_t rows = 0;
  for (const auto& p : parts) {
    FOVEA_CHECK(p.dtype == first.dtype, what, ": parts have dtypes ", dtype_name(first.dtype), " and ",
                dtype_name(p.dtype));
    FOVEA_CHECK(p.rank() == first.rank() && p.rank() >= 1 &&
                    std::equal(p.shape.begin() + 1, p.shape.end(), first.shape.begin() + 1),
                what, ": parts have shapes ", shape_str(first.shape), " and ", shape_str(p.shape));
    rows += p.shape[0];
  }
  shape[0] = rows;
  Tensor out = Tensor::host(first.dtype, shape);
  char* dst = out.ptr<char>();
  for (const auto& p : parts) {
    std::memcpy(dst, p.data, p.nbytes());
    dst += p.nbytes();
  }
  return out;
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
