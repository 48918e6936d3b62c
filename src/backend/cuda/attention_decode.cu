// Host side of the split-KV decode kernel (attention_decode.cuh): its configuration, how a step's keys are split,
// the launch. The configuration and the split rule, and what they were measured against (the other
// configurations and the FOVEA_CUDA_DECODE_* switches that chose them were removed; the last tree with them:
// commit fb2dff3):
// - 6 warps x 2 stages per block (w6s2). Session 5 (Nsight Compute, 52 x ~350 keys): 4 warps x 3 stages ran at
//   2.4 TB/s with 8 warps per SM, each issuing one instruction per ~5.3 cycles, ~800 per 16-key tile: bound by
//   the warps' instruction latency, not by bytes in flight. Two stages per warp make room for 12 warps per SM:
//   w6s2 against w4, 64 x 480 keys 3006 vs 2902 GB/s, 64 x 352 planned 1024 2710 vs 2650, 64 x 3409 4003 vs 3925;
//   engine decode 5.63 vs 5.77-5.94 ms per step. 2 and 8 warps lost to 4 at every shape; 4 x 2 (three blocks per
//   SM) 2562 GB/s at 64 x 480.
// - Each sequence divides its own keys over the splits. Recorded decode steps size their splits for the padded
//   context (table width x block size, e.g. 1024 keys for a ~480-key batch): with fixed key ranges most splits
//   of a shorter sequence were empty. H200, 64 sequences of 480 keys planned for 1024 (bench/results/cuda_ops,
//   run 10): balanced at 2 waves 2343 GB/s, 4 waves 2161, 8 waves 1880; fixed ranges at 8 waves 2232.
// - Splits for 1.5 waves of blocks. Session 3 (run 11): at 1 or 1.5 waves those 64 sequences take one split each
//   (no combine pass), 2959 GB/s, and the engine's decode step fell from 6.15 to 5.96 ms; 1.5 also splits 8
//   sequences of 3409 keys (2411 GB/s, 1 wave 2142, 2 waves 2198) and 64 of them (3943, 2 waves 3776).
#include <algorithm>
#include <cmath>

#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_info.h"
#include "backend/cuda/kernel_utils.cuh"

namespace fovea::cuda {
namespace {

// 6 warps x 2 stages: 104 KiB at head dim 128, two blocks per SM.
template <int kPad>
using DecodeW6S2 = SplitDecodeConfig<kPad, 6, 2>;

// A split of fewer keys than this is not worth its block: 128 keys are two tiles per warp of a 4-warp block.
constexpr int kMinSplitKeys = 128;
constexpr double kWaves = 1.5;  // blocks the splits aim for, in waves of the whole GPU

struct Setup {
  int sms = 0;
  int blocks_per_sm[3] = {1, 1, 1};  // by padded head dim 32, 64, 128
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

Setup make_setup() {
  Setup s;
  s.blocks_per_sm[0] = prepare_config<DecodeW6S2<32>>();
  s.blocks_per_sm[1] = prepare_config<DecodeW6S2<64>>();
  s.blocks_per_sm[2] = prepare_config<DecodeW6S2<128>>();
  s.sms = current_sm_count();
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

}  // namespace

void prepare_split_decode_kernels() { setup(); }

SplitDecodePlan plan_split_decode(const PagedAttentionArgs& a, int group, int max_splits) {
  const Setup& s = setup();
  SplitDecodePlan plan;
  const int64_t rows = int64_t(a.max_q_len) * group;
  if (a.num_seqs <= 0 || a.max_q_len < 1 || rows > 16) return plan;
  if (a.head_dim % 8 != 0 || a.head_dim > 128) return plan;
  plan.use = true;
  if (!a.workspace) return plan;
  // Enough blocks for kWaves full waves of the GPU, but no split under kMinSplitKeys keys, no more splits than
  // the combine kernel merges, and the partials must fit the workspace.
  const int64_t pairs = int64_t(a.num_seqs) * a.kv_heads;
  const int64_t target = int64_t(std::ceil(kWaves * s.sms * s.blocks_per_sm[pad_index(a.head_dim)]));
  const int64_t wanted = (target + pairs - 1) / pairs;
  const int64_t by_keys = a.max_ctx_len / kMinSplitKeys;
  const size_t per_split = size_t(pairs) * size_t(rows) * (a.head_dim + 2) * sizeof(float);
  const int64_t by_memory = int64_t(a.workspace_bytes / per_split);
  int64_t splits = std::min<int64_t>({wanted, by_keys, by_memory, max_splits});
  if (splits < 2) return plan;
  // Equal key ranges, each a whole number of 16-key warp tiles (a block's time is its busiest warp's tiles, so
  // ranges are not rounded to whole rounds of the warps); rounding up may leave fewer splits.
  constexpr int64_t kTileKeys = DecodeW6S2<128>::kKeys;
  const int64_t keys = (a.max_ctx_len + splits - 1) / splits;
  const int64_t split_keys = (keys + kTileKeys - 1) / kTileKeys * kTileKeys;
  splits = (a.max_ctx_len + split_keys - 1) / split_keys;
  if (splits < 2) return plan;
  plan.splits = int(splits);
  plan.split_keys = int(split_keys);
  return plan;
}

void launch_split_decode(const AttentionProblem& p, int num_seqs, cudaStream_t stream) {
  if (num_seqs == 0) return;
  if (p.head_dim <= 32) return launch_config<DecodeW6S2<32>>(p, num_seqs, stream);
  if (p.head_dim <= 64) return launch_config<DecodeW6S2<64>>(p, num_seqs, stream);
  launch_config<DecodeW6S2<128>>(p, num_seqs, stream);
}

}  // namespace fovea::cuda
