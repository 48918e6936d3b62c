// The wgmma flash attention of attention_wgmma.cuh, pipelined the way FlashAttention-3 is (sm_90a, TMA only):
//
// - Warp specialisation: one extra producer warp streams K/V tiles with the tensor memory accelerator into
//   kStages shared-memory stages; a "full" mbarrier per stage counts the bytes in, an "empty" one counts the
//   consumer warps done with it. No __syncthreads in the loop: warpgroups drift apart, so one's softmax runs
//   while another's MMAs use the tensor cores (in attention_wgmma.cuh every warpgroup of a block does its
//   softmax at the same time, between two block-wide barriers, while the tensor cores idle).
// - Intra-warpgroup overlap: for key tile j a warpgroup issues S_j = Q·K_j^T and then O += P_{j-1}·V_{j-1},
//   waits for S_j only, and computes softmax(S_j) while the P·V MMA still runs; it then waits for P·V, rescales
//   O by the correction of tile j and packs P_j for the next round.
//
// The arithmetic is attention_wgmma.cuh's, operation for operation (O_j = O_{j-1} * c_j + P_j·V_j, the same
// bf16 rounding of P), so the outputs are bitwise those of the unpipelined kernel.
#pragma once
#include "backend/cuda/attention_wgmma.cuh"

namespace fovea::cuda {

// kConsumerRegisters > 0: the producer is a whole warpgroup that gives its registers to the consumers
// (setmaxnreg: the producer drops to 40 per thread, the consumers rise to kConsumerRegisters), so 128-key tiles at
// head dim 128 (S, P and O all in registers) fit without spilling. 0: a single producer warp, registers as the
// launch bounds give them.
template <int kPadDim, int kNumGroups, int kKeyTile, int kNumStages, int kMinBlocksPerSm, int kConsumerRegisters = 0>
struct WgmmaPipeConfig : WgmmaTiles<kPadDim, kNumGroups, kKeyTile, kNumStages> {
  static constexpr int kMinBlocks = kMinBlocksPerSm;
  static constexpr bool kTma = true;  // K/V always by TMA
  static constexpr bool kPipelined = true;
  static constexpr int kConsumerThreads = 128 * kNumGroups;
  static constexpr int kConsumerRegs = kConsumerRegisters;
  static constexpr int kProducerRegs = 40;
  static_assert(kConsumerRegisters == 0 ||
                    kMinBlocksPerSm * (kProducerRegs * 128 + kConsumerRegisters * kConsumerThreads) <= 65536,
                "the register file holds the producer's and the consumers' registers");
  static constexpr int kThreads = kConsumerThreads + (kConsumerRegisters > 0 ? 128 : 32);  // + the producer
  static constexpr int kBarrierBytes = 16 * kNumStages;  // "full" and "empty" per stage
  static constexpr int smem_bytes() { return WgmmaPipeConfig::smem_bytes_with(kBarrierBytes); }
};

namespace wgmma_detail {

__device__ __forceinline__ void barrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Waits until at most N committed wgmma groups of this warp are still pending.
template <int N>
__device__ __forceinline__ void wait_pending() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void pin_regs(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(r[i][e])::"memory");
}
template <int kRegs>
__device__ __forceinline__ void raise_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void lower_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
// Barrier among the consumer warps only (the producer warp keeps streaming).
__device__ __forceinline__ void consumer_sync(int threads) {
  asm volatile("bar.sync 1, %0;\n" ::"r"(threads) : "memory");
}

}  // namespace wgmma_detail

template <class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    flash_attention_wgmma_pipelined(AttentionProblem p, const __grid_constant__ CUtensorMap k_map,
                                    const __grid_constant__ CUtensorMap v_map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace wgmma_detail;
  extern __shared__ unsigned char smem_raw[];
  const WgmmaSmem<C> smem(smem_raw);
  const uint32_t full_bars = smem_addr(smem.barriers());
  const uint32_t empty_bars = full_bars + 8 * C::kStages;
  auto full_bar = [&](int tile) { return full_bars + 8 * uint32_t(tile % C::kStages); };
  auto empty_bar = [&](int tile) { return empty_bars + 8 * uint32_t(tile % C::kStages); };
  auto phase = [](int tile) { return uint32_t(tile / C::kStages) & 1u; };

  const int seq = blockIdx.z, kv_head = blockIdx.y;
  const SequenceSpan span = sequence_span(p, seq);
  // Causal blocks late in a sequence see the most keys: schedule them first so the grid's tail is short.
  const int row_tile = p.paged ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  // Dense problems may take the keys of their first p.lead tokens apart (attention_common.cuh): key tiles start
  // after them. dense_lead (attention.cu) sets it, 0 when paged.
  const int lead = p.lead;
  const int row0 = row_tile * C::kRows;
  if (row0 / p.group >= span.q_len) return;  // whole block past this sequence's queries (uniform exit)
  const int last_token = min(span.q_len - 1, (row0 + C::kRows - 1) / p.group);
  const int kv_end = min(span.kv_len, span.limit(last_token) + 1);
  const int end_tile = max(0, (kv_end - lead + C::kKeys - 1) / C::kKeys);

  if (threadIdx.x == 0) {
    for (int i = 0; i < C::kStages; ++i) {
      barrier_init(full_bars + 8 * i, 1);
      barrier_init(empty_bars + 8 * i, 4 * C::kGroups);  // every consumer warp arrives once per tile
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if constexpr (C::kConsumerRegs > 0) {
    if (threadIdx.x >= C::kConsumerThreads) {
      lower_registers<C::kProducerRegs>();
      if (threadIdx.x >= C::kConsumerThreads + 32) return;  // one warp of the producer warpgroup copies
    } else {
      raise_registers<C::kConsumerRegs>();
    }
  }

  if (threadIdx.x >= C::kConsumerThreads) {
    // Producer warp: waits for a stage to be free, lane 0 announces its bytes, the lanes copy (copy_stage).
    const int lane = threadIdx.x % 32;
    for (int tile = 0; tile < end_tile; ++tile) {
      if (tile >= C::kStages) barrier_wait(empty_bar(tile), phase(tile) ^ 1u);
      const uint32_t bar = full_bar(tile);
      if (lane == 0) barrier_expect(bar, 2 * C::kTileBytes);
      __syncwarp();
      copy_stage<C>(p, k_map, v_map, seq, kv_head, kv_end, tile, lane, smem_addr(smem.k(tile)),
                    smem_addr(smem.v(tile)), bar);
    }
    return;
  }

  // Consumers: Q by cp.async (every consumer thread), then a consumer-only barrier.
  for (int chunk = threadIdx.x; chunk < C::kRows * C::kChunks; chunk += C::kConsumerThreads) {
    const int row = chunk / C::kChunks, c = chunk % C::kChunks;
    const int token = (row0 + row) / p.group;
    const __nv_bfloat16* src =
        token < span.q_len && c * 8 < p.head_dim ? query_ptr(p, span, token, kv_head * p.group + (row0 + row) % p.group)
                                                 : nullptr;
    mma_detail::cp_async16(smem.q + swizzled(C::kRows, row, c), src ? src + c * 8 : p.qkv, src != nullptr);
  }
  mma_detail::cp_async_commit();
  mma_detail::cp_async_wait<0>();
  fence_proxy_async();
  consumer_sync(C::kConsumerThreads);

  const int group_index = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int group_row0 = row0 + group_index * 64;
  const int my_row[2] = {group_row0 + warp * 16 + g, group_row0 + warp * 16 + g + 8};
  RowState st = make_row_state(p, span, my_row);
  const int visible_end = visible_tiles(p, span, group_row0, end_tile, C::kKeys, lead);
  auto release = [&](int tile) {
    if (lane == 0) barrier_arrive(empty_bar(tile));
  };

  float acc[C::kPad / 8][4] = {};
  const uint32_t q_addr = smem_addr(smem.q) + uint32_t(group_index) * 64 * 128;
  float s[C::kKeys / 8][4];
  uint32_t weights[C::kKeys / 16][4];
  float correction[2];
  auto scores_to_weights = [&](int tile) {
    const int key0 = lead + tile * C::kKeys;
    if (key0 + C::kKeys - 1 > st.warp_min_limit) mma_detail::mask_scores(s, key0, t, st.key_limit);
    mma_detail::softmax_weights<true>(s, st.max, st.sum, p.scale_log2, correction);
  };
  if (visible_end > 0) {
    barrier_wait(full_bar(0), phase(0));
    issue_scores<C>(s, q_addr, smem_addr(smem.k(0)));
    wait_all();
    pin(s);
    scores_to_weights(0);  // the accumulators are zero: no rescale
    pack_weights<C::kKeys>(weights, s);
    for (int tile = 1; tile < visible_end; ++tile) {
      barrier_wait(full_bar(tile), phase(tile));
      issue_scores<C>(s, q_addr, smem_addr(smem.k(tile)));
      issue_packed_values<C>(acc, weights, smem_addr(smem.v(tile - 1)));
      wait_pending<1>();  // S_tile has landed; P·V of tile - 1 may still run
      pin(s);
      scores_to_weights(tile);
      wait_all();
      pin(acc);
      pin_regs(weights);
      release(tile - 1);
      mma_detail::rescale_output(acc, correction);
      pack_weights<C::kKeys>(weights, s);
    }
    issue_packed_values<C>(acc, weights, smem_addr(smem.v(visible_end - 1)));
    wait_all();
    pin(acc);
    pin_regs(weights);
    release(visible_end - 1);
  }
  // Tiles none of this warpgroup's rows may see: still consumed (after landing), so the producer can go on.
  for (int tile = visible_end; tile < end_tile; ++tile) {
    barrier_wait(full_bar(tile), phase(tile));
    release(tile);
  }
  if (lead > 0) {
    const int block_row[2] = {my_row[0] - row0, my_row[1] - row0};
    fold_lead_keys<C>(p, span, seq, kv_head, smem.q, block_row, st, acc, t);
  }

  store_rows(p, span, st, acc, my_row, kv_head, t);
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

}  // namespace fovea::cuda
