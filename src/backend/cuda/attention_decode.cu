// Host side of the split-KV decode kernel (attention_decode.cuh): which configuration runs, how a step's keys
// are split, the launch. FOVEA_CUDA_DECODE_KERNEL picks the kernel for benchmarking: old (the general kernel,
// attention_mma.cuh), w2 / w4 / w8 (this kernel with 2, 4 or 8 warps per block, 3-4 stages per warp), w4s2 / w6s2
// (4 or 6 warps with two stages each; w6s2 is the default);
// FOVEA_CUDA_DECODE_WAVES overrides the number of block waves the splits aim for (default 1.5), and
// FOVEA_CUDA_DECODE_BALANCE=0 turns off the per-sequence division of keys. All are read once. Recorded decode
// steps size their splits for the padded context (table width x block size, e.g. 1024 keys for a ~480-key
// batch): with fixed key ranges most splits of a shorter sequence were empty, so each sequence now divides its
// own keys over the splits. H200, 64 sequences of 480 keys planned for 1024 (bench/results/cuda_ops, run 10):
// balanced at 2 waves 2343 GB/s, 4 waves 2161, 8 waves 1880; fixed ranges at 8 waves 2232. Session 3 (run 11)
// went below 2: at 1 or 1.5 waves those 64 sequences take one split each (no combine pass), 2959 GB/s, and the
// engine's decode step fell from 6.15 to 5.96 ms; 1.5 also splits 8 sequences of 3409 keys (2411 GB/s, 1 wave
// 2142, 2 waves 2198) and 64 of them (3943, 2 waves 3776). w2 and w8 lost to w4 at every shape. Session 5 (Nsight
// Compute, 52 x ~350 keys): w4 ran at 2.4 TB/s with 8 warps per SM, each issuing one instruction per ~5.3 cycles,
// ~800 per 16-key tile: bound by the warps' instruction latency, not by bytes in flight. Two stages per warp
// make room for 12 warps per SM: w6s2 against w4, 64 x 480 keys 3006 vs 2902 GB/s, 64 x 352 planned 1024 2710 vs
// 2650, 64 x 3409 4003 vs 3925; engine decode 5.63 vs 5.77-5.94 ms per step. w4s2 (three 4-warp blocks per SM)
// lost: 2562 GB/s at 64 x 480 (1.05 waves).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_utils.cuh"

namespace fovea::cuda {
namespace {

// 2 warps x 4 stages (68 KiB, three blocks per SM), 4 x 3 (102 KiB, two per SM), 8 x 3 (204 KiB, one per SM) at
// head dim 128: each keeps 2-3 tiles of 8.5 KiB per warp loading, 128-150 KiB per SM.
template <int kPad>
using DecodeW2 = SplitDecodeConfig<kPad, 2, 4>;
template <int kPad>
using DecodeW4 = SplitDecodeConfig<kPad, 4, 3>;
template <int kPad>
using DecodeW8 = SplitDecodeConfig<kPad, 8, 3>;
// Two stages per warp (one tile loading while one is computed on) leave room for 12 warps per SM instead of 8:
// 4 x 2 (70 KiB, three blocks per SM) and 6 x 2 (104 KiB, two per SM).
template <int kPad>
using DecodeW4S2 = SplitDecodeConfig<kPad, 4, 2>;
template <int kPad>
using DecodeW6S2 = SplitDecodeConfig<kPad, 6, 2>;

enum class Variant { kOld, kW2, kW4, kW8, kW4S2, kW6S2 };

// A split of fewer keys than this is not worth its block: 128 keys are two tiles per warp of a 4-warp block.
constexpr int kMinSplitKeys = 128;

struct Setup {
  Variant variant = Variant::kW6S2;
  int sms = 0;
  int blocks_per_sm[3] = {1, 1, 1};  // by padded head dim 32, 64, 128
  double waves = 1.5;
  bool balance = true;  // FOVEA_CUDA_DECODE_BALANCE=0: split s takes keys [s * split_keys, ...) of every sequence
};

int pad_index(int head_dim) { return head_dim <= 32 ? 0 : head_dim <= 64 ? 1 : 2; }

template <class C>
int prepare_config() {
  allow_shared_memory(split_decode_attention<C>, C::smem_bytes(), true);
  int blocks = 0;
  FOVEA_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, split_decode_attention<C>, C::kThreads, C::smem_bytes()));
  return std::max(blocks, 1);
}

template <template <int> class V>
void prepare_variant(Setup& s) {
  s.blocks_per_sm[0] = prepare_config<V<32>>();
  s.blocks_per_sm[1] = prepare_config<V<64>>();
  s.blocks_per_sm[2] = prepare_config<V<128>>();
}

Setup make_setup() {
  Setup s;
  const char* kernel = std::getenv("FOVEA_CUDA_DECODE_KERNEL");
  const std::string name = kernel ? kernel : "";
  if (name == "old") {
    s.variant = Variant::kOld;
    return s;
  }
  FOVEA_CHECK(name.empty() || name == "new" || name == "w2" || name == "w4" || name == "w8" || name == "w4s2" ||
                  name == "w6s2",
              "FOVEA_CUDA_DECODE_KERNEL=", name, ": expected old, new, w2, w4, w8, w4s2 or w6s2");
  s.variant = name == "w2"     ? Variant::kW2
              : name == "w8"   ? Variant::kW8
              : name == "w4s2" ? Variant::kW4S2
              : name == "w4"   ? Variant::kW4
                               : Variant::kW6S2;
  if (s.variant == Variant::kW2) prepare_variant<DecodeW2>(s);
  if (s.variant == Variant::kW4) prepare_variant<DecodeW4>(s);
  if (s.variant == Variant::kW8) prepare_variant<DecodeW8>(s);
  if (s.variant == Variant::kW4S2) prepare_variant<DecodeW4S2>(s);
  if (s.variant == Variant::kW6S2) prepare_variant<DecodeW6S2>(s);
  int device = 0;
  FOVEA_CUDA_CHECK(cudaGetDevice(&device));
  FOVEA_CUDA_CHECK(cudaDeviceGetAttribute(&s.sms, cudaDevAttrMultiProcessorCount, device));
  if (const char* balance = std::getenv("FOVEA_CUDA_DECODE_BALANCE")) s.balance = std::string(balance) != "0";
  if (const char* waves = std::getenv("FOVEA_CUDA_DECODE_WAVES")) {
    s.waves = std::atof(waves);
    FOVEA_CHECK(s.waves > 0, "FOVEA_CUDA_DECODE_WAVES=", waves, ": expected a positive number");
  }
  return s;
}

const Setup& setup() {
  static const Setup s = make_setup();
  return s;
}

template <class C>
void launch_config(const AttentionProblem& p, int num_seqs, cudaStream_t stream) {
  const dim3 grid(p.num_splits, p.kv_heads, num_seqs);
  launch_dependent(split_decode_attention<C>, grid, C::kThreads, C::smem_bytes(), stream, p);
}

template <template <int> class V>
void launch_variant(const AttentionProblem& p, int num_seqs, cudaStream_t stream) {
  if (p.head_dim <= 32) return launch_config<V<32>>(p, num_seqs, stream);
  if (p.head_dim <= 64) return launch_config<V<64>>(p, num_seqs, stream);
  launch_config<V<128>>(p, num_seqs, stream);
}

}  // namespace

void prepare_split_decode_kernels() { setup(); }

SplitDecodePlan plan_split_decode(const PagedAttentionArgs& a, int group, int max_splits) {
  const Setup& s = setup();
  SplitDecodePlan plan;
  const int64_t rows = int64_t(a.max_q_len) * group;
  if (s.variant == Variant::kOld || a.num_seqs <= 0 || a.max_q_len < 1 || rows > 16) return plan;
  if (a.head_dim % 8 != 0 || a.head_dim > 128) return plan;
  plan.use = true;
  if (!a.workspace) return plan;
  // Enough blocks for `waves` full waves of the GPU, but no split under kMinSplitKeys keys, no more splits than
  // the combine kernel merges, and the partials must fit the workspace.
  const int64_t pairs = int64_t(a.num_seqs) * a.kv_heads;
  const int64_t target = int64_t(std::ceil(s.waves * s.sms * s.blocks_per_sm[pad_index(a.head_dim)]));
  const int64_t wanted = (target + pairs - 1) / pairs;
  const int64_t by_keys = a.max_ctx_len / kMinSplitKeys;
  const size_t per_split = size_t(pairs) * size_t(rows) * (a.head_dim + 2) * sizeof(float);
  const int64_t by_memory = int64_t(a.workspace_bytes / per_split);
  int64_t splits = std::min<int64_t>({wanted, by_keys, by_memory, max_splits});
  if (splits < 2) return plan;
  // Equal key ranges, each a whole number of 16-key warp tiles (a block's time is its busiest warp's tiles, so
  // ranges are not rounded to whole rounds of the warps); rounding up may leave fewer splits.
  constexpr int64_t kTileKeys = DecodeW4<128>::kKeys;
  const int64_t keys = (a.max_ctx_len + splits - 1) / splits;
  const int64_t split_keys = (keys + kTileKeys - 1) / kTileKeys * kTileKeys;
  splits = (a.max_ctx_len + split_keys - 1) / split_keys;
  if (splits < 2) return plan;
  plan.splits = int(splits);
  plan.split_keys = int(split_keys);
  return plan;
}

void launch_split_decode(const AttentionProblem& problem, int num_seqs, cudaStream_t stream) {
  if (num_seqs == 0) return;
  AttentionProblem p = problem;
  p.balance_splits = setup().balance;
  switch (setup().variant) {
    case Variant::kW2: return launch_variant<DecodeW2>(p, num_seqs, stream);
    case Variant::kW4: return launch_variant<DecodeW4>(p, num_seqs, stream);
    case Variant::kW8: return launch_variant<DecodeW8>(p, num_seqs, stream);
    case Variant::kW4S2: return launch_variant<DecodeW4S2>(p, num_seqs, stream);
    case Variant::kW6S2: return launch_variant<DecodeW6S2>(p, num_seqs, stream);
    case Variant::kOld: break;
  }
  FOVEA_FAIL("launch_split_decode: FOVEA_CUDA_DECODE_KERNEL=old selects the general kernel");
}

}  // namespace fovea::cuda
