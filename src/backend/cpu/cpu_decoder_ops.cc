// Decoder ops of CpuBackend: rotary embedding, KV-cache writes, paged causal GQA attention, and the heads
// (argmax, log-softmax of chosen ids).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_util.h"

namespace fovea {

using cpu::check_host;
using cpu::check_matrix;
using cpu::check_vector;
using cpu::parallel_rows;

void CpuBackend::rope(Tensor& qkv, const Tensor& positions, int heads, int kv_heads, int head_dim, float theta) {
  FOVEA_CHECK(heads > 0 && kv_heads > 0 && head_dim > 0 && head_dim % 2 == 0, "rope: bad head sizes");
  const int64_t T = positions.numel(), D = head_dim, half = D / 2, width = int64_t(heads + 2 * kv_heads) * D;
  check_vector(positions, T, DType::I32, "rope", "positions");
  check_matrix(qkv, T, width, "rope", "qkv");
  // inv_freq as transformers computes it: float32 1 / theta^(2i/D); the angle is the float32 product pos*inv_freq.
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv_freq[size_t(i)] = 1.0f / std::pow(theta, float(2 * i) / float(D));
  const int rotated_heads = heads + kv_heads;  // q heads then k heads; v is left alone
  parallel_rows(T, 8.0 * double(rotated_heads) * double(D), [&](int64_t begin, int64_t end) {
    std::vector<float> cos_t(static_cast<size_t>(half)), sin_t(static_cast<size_t>(half));
    for (int64_t t = begin; t < end; ++t) {
      const float pos = float(positions.ptr<int32_t>()[t]);
      for (int64_t i = 0; i < half; ++i) {
        const float angle = pos * inv_freq[size_t(i)];
        cos_t[size_t(i)] = float(std::cos(double(angle)));
        sin_t[size_t(i)] = float(std::sin(double(angle)));
      }
      float* row = qkv.ptr<float>() + t * width;
      for (int h = 0; h < rotated_heads; ++h) {
        float* x = row + h * D;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = x[i], x2 = x[i + half];
          x[i] = x1 * cos_t[size_t(i)] - x2 * sin_t[size_t(i)];
          x[i + half] = x2 * cos_t[size_t(i)] + x1 * sin_t[size_t(i)];
        }
      }
    }
  });
}

namespace {

// Checks a layer's cache tensors and returns its shape [blocks, block_size, kv_heads, head_dim].
void check_cache(const KvCacheLayer& cache, int kv_heads, int head_dim, const char* op) {
  check_host(cache.k, DType::F32, op, "cache.k");
  check_host(cache.v, DType::F32, op, "cache.v");
  FOVEA_CHECK(cache.k.rank() == 4 && cache.k.dim(2) == kv_heads && cache.k.dim(3) == head_dim, op,
              ": cache.k has shape ", shape_str(cache.k.shape), ", expected [blocks, block_size, ", kv_heads, ", ",
              head_dim, "]");
  FOVEA_CHECK(cache.v.shape == cache.k.shape, op, ": cache.v ", shape_str(cache.v.shape), " differs from cache.k ",
              shape_str(cache.k.shape));
}

}  // namespace

void CpuBackend::kv_write(const Tensor& qkv, const Tensor& slots, int heads, int kv_heads, int head_dim,
                          KvCacheLayer& cache) {
  check_cache(cache, kv_heads, head_dim, "kv_write");
  const int64_t T = slots.numel(), KVD = int64_t(kv_heads) * head_dim, QD = int64_t(heads) * head_dim;
  const int64_t width = QD + 2 * KVD;
  check_vector(slots, T, DType::I32, "kv_write", "slots");
  check_matrix(qkv, T, width, "kv_write", "qkv");
  const int64_t num_slots = cache.k.dim(0) * cache.k.dim(1);
  const int32_t* slot = slots.ptr<int32_t>();
  for (int64_t t = 0; t < T; ++t)
    FOVEA_CHECK(slot[t] >= 0 && slot[t] < num_slots, "kv_write: slot ", slot[t], " at ", t, " outside [0, ", num_slots,
                ")");
  for (int64_t t = 0; t < T; ++t) {
    const float* row = qkv.ptr<float>() + t * width;
    std::copy_n(row + QD, KVD, cache.k.ptr<float>() + int64_t(slot[t]) * KVD);
    std::copy_n(row + QD + KVD, KVD, cache.v.ptr<float>() + int64_t(slot[t]) * KVD);
  }
}

namespace {

struct PagedView {
  const int32_t* cu_q;
  const int32_t* ctx_len;
  const int32_t* block_table;
  int64_t max_blocks;
};

// Validates the batch description against the cache and the number of query rows, so the attention loop can
// index without checks.
PagedView check_paged_batch(const PagedAttentionBatch& batch, int64_t query_rows, int64_t num_blocks,
                            int64_t block_size) {
  const int64_t S = batch.num_seqs;
  FOVEA_CHECK(S >= 0, "paged_attention: num_seqs ", S);
  check_vector(batch.cu_q, S + 1, DType::I32, "paged_attention", "cu_q");
  check_vector(batch.ctx_len, S, DType::I32, "paged_attention", "ctx_len");
  check_host(batch.block_table, DType::I32, "paged_attention", "block_table");
  FOVEA_CHECK(batch.block_table.rank() == 2 && batch.block_table.dim(0) == S, "paged_attention: block_table ",
              shape_str(batch.block_table.shape), " for ", S, " sequences");
  PagedView v{batch.cu_q.ptr<int32_t>(), batch.ctx_len.ptr<int32_t>(), batch.block_table.ptr<int32_t>(),
              batch.block_table.dim(1)};
  FOVEA_CHECK(v.cu_q[0] == 0 && v.cu_q[S] == query_rows, "paged_attention: cu_q spans [", v.cu_q[0], ", ", v.cu_q[S],
              "), expected [0, ", query_rows, ")");
  for (int64_t s = 0; s < S; ++s) {
    const int64_t q_len = v.cu_q[s + 1] - v.cu_q[s], ctx = v.ctx_len[s];
    FOVEA_CHECK(q_len >= 0 && ctx >= q_len, "paged_attention: sequence ", s, " has q_len ", q_len, " and ctx_len ",
                ctx);
    const int64_t blocks_needed = (ctx + block_size - 1) / block_size;
    FOVEA_CHECK(blocks_needed <= v.max_blocks, "paged_attention: sequence ", s, " needs ", blocks_needed,
                " blocks, the table has ", v.max_blocks);
    for (int64_t i = 0; i < blocks_needed; ++i) {
      const int32_t block = v.block_table[s * v.max_blocks + i];
      FOVEA_CHECK(block >= 0 && block < num_blocks, "paged_attention: sequence ", s, " block ", i, " is ", block,
                  ", outside [0, ", num_blocks, ")");
    }
  }
  return v;
}

}  // namespace

void CpuBackend::paged_attention(const Tensor& qkv, const PagedAttentionBatch& batch, const KvCacheLayer& cache,
                                 int heads, int kv_heads, int head_dim, Tensor& out) {
  FOVEA_CHECK(heads > 0 && kv_heads > 0 && heads % kv_heads == 0 && head_dim > 0, "paged_attention: heads ", heads,
              " not a multiple of kv_heads ", kv_heads);
  check_cache(cache, kv_heads, head_dim, "paged_attention");
  const int64_t T = cpu::rows_of(qkv), D = head_dim, QD = int64_t(heads) * D, KVD = int64_t(kv_heads) * D;
  check_matrix(qkv, T, QD + 2 * KVD, "paged_attention", "qkv");
  check_matrix(out, T, QD, "paged_attention", "out");
  const int64_t block_size = cache.k.dim(1);
  const PagedView v = check_paged_batch(batch, T, cache.k.dim(0), block_size);
  const int group = heads / kv_heads;  // q head h reads kv head h / group
  const float scale = 1.0f / std::sqrt(float(D));
  // One task per (sequence, kv head, block of new tokens): gather the cache rows the block can see into
  // contiguous K and V, compute all its scores (every q head of the group, every token) with one GEMM, then a
  // causal softmax and weighted sum per row.
  constexpr int64_t kTokensPerTask = 16;
  struct Task {
    int64_t seq, kv_head, first, count;  // new tokens [first, first + count) of the sequence
  };
  std::vector<Task> tasks;
  for (int64_t s = 0; s < batch.num_seqs; ++s)
    for (int64_t g = 0; g < kv_heads; ++g)
      for (int64_t j = 0; j < v.cu_q[s + 1] - v.cu_q[s]; j += kTokensPerTask)
        tasks.push_back({s, g, j, std::min(kTokensPerTask, v.cu_q[s + 1] - v.cu_q[s] - j)});
  const double task_work = 4.0 * double(kTokensPerTask * group) * double(batch.max_ctx_len + 1) * double(D);
  parallel_rows(int64_t(tasks.size()), task_work, [&](int64_t begin, int64_t end) {
    std::vector<float> keys, values, queries, scores;
    for (int64_t i = begin; i < end; ++i) {
      const Task& task = tasks[size_t(i)];
      const int64_t q_len = v.cu_q[task.seq + 1] - v.cu_q[task.seq];
      const int64_t first_pos = v.ctx_len[task.seq] - q_len;        // position of the sequence's first new token
      const int64_t visible = first_pos + task.first + task.count;  // cache rows the block's last token sees
      const int32_t* blocks = v.block_table + task.seq * v.max_blocks;
      keys.resize(size_t(visible * D));
      values.resize(size_t(visible * D));
      for (int64_t p = 0; p < visible; ++p) {
        const int64_t slot = int64_t(blocks[p / block_size]) * block_size + p % block_size;
        std::copy_n(cache.k.ptr<float>() + slot * KVD + task.kv_head * D, D, keys.data() + p * D);
        std::copy_n(cache.v.ptr<float>() + slot * KVD + task.kv_head * D, D, values.data() + p * D);
      }
      // Query rows in (token, head of the group) order.
      const int64_t rows = task.count * group;
      queries.resize(size_t(rows * D));
      for (int64_t j = 0; j < task.count; ++j)
        for (int64_t hh = 0; hh < group; ++hh) {
          const int64_t t = v.cu_q[task.seq] + task.first + j, h = task.kv_head * group + hh;
          std::copy_n(qkv.ptr<float>() + t * (QD + 2 * KVD) + h * D, D, queries.data() + (j * group + hh) * D);
        }
      scores.resize(size_t(rows * visible));
      cpu::gemm_nt(queries.data(), keys.data(), nullptr, scores.data(), rows, visible, D, Activation::None, false);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t j = r / group, h = task.kv_head * group + r % group;
        const int64_t t = v.cu_q[task.seq] + task.first + j;
        const int64_t seen = first_pos + task.first + j + 1;  // causal: positions 0..pos
        float* s = scores.data() + r * visible;
        for (int64_t p = 0; p < seen; ++p) s[p] *= scale;
        const float inv_sum = cpu::exp_normalize(s, seen);
        cpu::weighted_row_sum(s, seen, values.data(), D, D, inv_sum, out.ptr<float>() + t * QD + h * D);
      }
    }
  });
}

void CpuBackend::argmax(const Tensor& logits, Tensor& ids) {
  check_host(logits, DType::F32, "argmax", "logits");
  const int64_t B = cpu::rows_of(logits), V = cpu::cols_of(logits);
  FOVEA_CHECK(V > 0, "argmax: empty vocabulary");
  check_vector(ids, B, DType::I32, "argmax", "ids");
  parallel_rows(B, double(V), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* row = logits.ptr<float>() + b * V;
      int64_t best = 0;
      for (int64_t i = 1; i < V; ++i)
        if (row[i] > row[best]) best = i;  // strict: the lowest index wins ties
      ids.ptr<int32_t>()[b] = int32_t(best);
    }
  });
}

void CpuBackend::log_softmax_gather(const Tensor& logits, const Tensor& ids, Tensor& out) {
  check_host(logits, DType::F32, "log_softmax_gather", "logits");
  const int64_t B = cpu::rows_of(logits), V = cpu::cols_of(logits);
  check_host(ids, DType::I32, "log_softmax_gather", "ids");
  FOVEA_CHECK(ids.rank() == 2 && ids.dim(0) == B, "log_softmax_gather: ids ", shape_str(ids.shape), " for ", B,
              " rows");
  const int64_t K = ids.dim(1);
  check_matrix(out, B, K, "log_softmax_gather", "out");
  for (int64_t i = 0; i < B * K; ++i)
    FOVEA_CHECK(ids.ptr<int32_t>()[i] >= 0 && ids.ptr<int32_t>()[i] < V, "log_softmax_gather: id ",
                ids.ptr<int32_t>()[i], " outside [0, ", V, ")");
  parallel_rows(B, 4.0 * double(V), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* row = logits.ptr<float>() + b * V;
      double max_logit = row[0];
      for (int64_t i = 1; i < V; ++i) max_logit = std::max(max_logit, double(row[i]));
      double sum = 0.0;
      for (int64_t i = 0; i < V; ++i) sum += std::exp(double(row[i]) - max_logit);
      const double log_norm = max_logit + std::log(sum);
      for (int64_t k = 0; k < K; ++k)
        out.ptr<float>()[b * K + k] = float(double(row[ids.ptr<int32_t>()[b * K + k]]) - log_norm);
    }
  });
}

}  // namespace fovea
