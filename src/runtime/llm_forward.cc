#include "runtime/llm_forward.h"

#include <algorithm>

namespace fovea {
namespace {

// A host tensor viewing `values` without copying, for upload().
Tensor host_view(const std::vector<int32_t>& values, Shape shape) {
  Tensor t;
  t.data = const_cast<int32_t*>(values.data());
  t.dtype = DType::I32;
  t.device = Device::CPU;
  t.shape = std::move(shape);
  return t;
}

}  // namespace

KvCache alloc_kv_cache(const LlmConfig& config, Backend& backend, int blocks, int block_size) {
  FOVEA_CHECK(blocks > 0 && block_size > 0, "kv cache: ", blocks, " blocks of ", block_size);
  KvCache kv;
  const Shape shape{blocks, block_size, config.kv_heads, config.head_dim};
  for (int l = 0; l < config.layers; ++l) {
    KvCacheLayer layer{backend.alloc(backend.compute_dtype(), shape), backend.alloc(backend.compute_dtype(), shape)};
    // Zeroed once so that reading a never-written row (a bug) shows up as zeros rather than NaN garbage.
    backend.fill_zero(layer.k);
    backend.fill_zero(layer.v);
    kv.bytes += layer.k.nbytes() + layer.v.nbytes();
    kv.layers.push_back(std::move(layer));
  }
  return kv;
}

Tensor LlmForward::alloc(DType dtype, const Shape& shape) {
  Tensor t = be_.alloc(dtype, shape);
  workspace_bytes_ += t.nbytes();
  return t;
}

LlmForward::LlmForward(const ModelDesc& desc, const LlmWeights& weights, Backend& backend,
                       const LlmWorkspaceSizes& sizes)
    : desc_(desc),
      w_(weights),
      be_(backend),
      sizes_(sizes),
      graphs_(backend, sizes.decode_graphs, std::min(sizes.logits_rows, sizes.max_seqs), sizes.max_table_entries,
              sizes.block_size, sizes.scratch_block) {
  const LlmConfig& c = desc.llm;
  FOVEA_CHECK(sizes.max_tokens > 0 && sizes.max_seqs > 0 && sizes.max_table_entries > 0 && sizes.mlp_rows > 0 &&
                  sizes.logits_rows > 0 && sizes.max_answer_ids >= 0,
              "llm forward: bad workspace sizes");
  FOVEA_CHECK(c.heads % c.kv_heads == 0, "llm forward: ", c.heads, " heads not a multiple of ", c.kv_heads,
              " kv heads");
  const int64_t T = sizes.max_tokens, S = sizes.max_seqs, H = c.hidden, D = c.head_dim;
  const DType act = be_.compute_dtype();
  ids_ = alloc(DType::I32, {T});
  positions_ = alloc(DType::I32, {T});
  slots_ = alloc(DType::I32, {T});
  cu_q_ = alloc(DType::I32, {S + 1});
  ctx_len_ = alloc(DType::I32, {S});
  block_table_ = alloc(DType::I32, {int64_t(sizes.max_table_entries)});
  sample_rows_ = alloc(DType::I32, {S});
  answer_ids_ = alloc(DType::I32, {S * std::max(sizes.max_answer_ids, 1)});
  x_ = alloc(act, {T, H});
  qkv_ = alloc(act, {T, int64_t(c.heads + 2 * c.kv_heads) * D});
  attn_ = alloc(act, {T, int64_t(c.heads) * D});
  branch_ = alloc(act, {T, H});
  const int64_t mlp_rows = std::min<int64_t>(sizes.mlp_rows, T);
  gate_up_ = alloc(act, {mlp_rows, 2 * int64_t(c.ffn)});
  // qkv, gate_up and down take their inputs from add_rms_norm_fp8 / silu_mul_fp8
  fp8_rows_ =
      fp8_by_rows(weights.layers, {&LlmLayerWeights::qkv8, &LlmLayerWeights::gate_up8, &LlmLayerWeights::down8});
  if (fp8_rows_) {
    normed8_ = {alloc(DType::F8E4M3, {T, H}), alloc(DType::F32, {T})};
    act8_ = {alloc(DType::F8E4M3, {mlp_rows, int64_t(c.ffn)}), alloc(DType::F32, {mlp_rows})};
  } else {
    normed_ = alloc(act, {T, H});
    act_ = alloc(act, {mlp_rows, int64_t(c.ffn)});
  }
  sampled_qkv_ = alloc(act, {S, int64_t(c.heads + 2 * c.kv_heads) * D});
  // The sampled rows' batch has one query row per sequence, so its cu_q is always 0, 1, ..., up to S: uploaded
  // once here, a prefix of it viewed per step.
  sampled_cu_q_ = alloc(DType::I32, {S + 1});
  std::vector<int32_t> one_row_each(size_t(S + 1));
  for (int32_t i = 0; i <= int32_t(S); ++i) one_row_each[size_t(i)] = i;
  upload_ids(sampled_cu_q_, one_row_each);
  sampled_ctx_len_ = alloc(DType::I32, {S});
  sampled_block_table_ = alloc(DType::I32, {int64_t(sizes.max_table_entries)});
  last_x_ = alloc(act, {S, H});
  last_branch_ = alloc(act, {S, H});
  last_normed_ = alloc(act, {S, H});
  logits_ = alloc(act, {int64_t(sizes.logits_rows), int64_t(c.vocab)});
  argmax_ids_ = alloc(DType::I32, {int64_t(sizes.logits_rows)});
  answer_logprobs_ = alloc(DType::F32, {int64_t(sizes.logits_rows) * std::max(sizes.max_answer_ids, 1)});
}

Tensor LlmForward::upload_ids(Tensor& buffer, const std::vector<int32_t>& values) {
  FOVEA_CHECK(int64_t(values.size()) <= buffer.numel(), "llm forward: ", values.size(), " indices exceed a buffer of ",
              buffer.numel());
  Tensor dst = buffer.view({buffer.numel()}).rows(0, int64_t(values.size()));
  be_.upload(dst, host_view(values, {int64_t(values.size())}));
  return dst;
}

void LlmForward::embed(int tokens, const std::vector<VisionSegment>& vision, const VisionPool* pool) {
  Tensor x = x_.rows(0, tokens);
  be_.embedding(ids_.rows(0, tokens), w_.embed, x);
  // Image rows replace the <IMG_CONTEXT> embeddings; each segment is one contiguous run of step rows.
  for (const VisionSegment& seg : vision) {
    Tensor dst = x_.rows(seg.dst_row, seg.dst_row + seg.rows);
    be_.copy(dst, pool->slot_rows(seg.slot).rows(seg.slot_row, seg.slot_row + seg.rows));
  }
}

// x += add (add empty: x is only read), then x's RMSNorm into the input of the projections after it: normed8_
// already quantized (FP8 per-token weights) or normed_.
void LlmForward::norm_input(Tensor& x, const Tensor& add, const Tensor& gamma, int tokens) {
  const float eps = desc_.llm.rms_eps;
  if (fp8_rows_) {
    Fp8Rows normed8 = normed8_.rows(0, tokens);
    be_.add_rms_norm_fp8(x, add, gamma, eps, normed8);
    return;
  }
  Tensor normed = normed_.rows(0, tokens);
  if (add.empty()) be_.rms_norm(x, gamma, eps, normed);
  else be_.add_rms_norm(x, add, gamma, eps, normed);
}

// y = rows [r0, r1) of norm_input's output through one projection.
void LlmForward::project_input(int64_t r0, int64_t r1, const Tensor& w, const Fp8Linear& w8, const W4Linear& w4,
                               const Tensor& bias, Tensor& y) {
  if (fp8_rows_) be_.linear_fp8_rows(normed8_.rows(r0, r1), w8.codes, w8.scale, bias, y);
  else apply_linear(be_, normed_.rows(r0, r1), w, w8, w4, bias, y);
}

void LlmForward::mlp(const LlmLayerWeights& w, int tokens, Tensor& out_rows) {
  const int64_t slice = gate_up_.dim(0);
  for (int64_t r0 = 0; r0 < tokens; r0 += slice) {
    const int64_t r1 = std::min<int64_t>(tokens, r0 + slice);
    Tensor gate_up = gate_up_.rows(0, r1 - r0), out = out_rows.rows(r0, r1);
    project_input(r0, r1, w.gate_up_w, w.gate_up8, w.gate_up4, Tensor{}, gate_up);
    if (fp8_rows_) {
      Fp8Rows act8 = act8_.rows(0, r1 - r0);
      be_.silu_mul_fp8(gate_up, act8);
      be_.linear_fp8_rows(act8, w.down8.codes, w.down8.scale, Tensor{}, out);
    } else {
      Tensor act = act_.rows(0, r1 - r0);
      be_.silu_mul(gate_up, act);
      apply_linear(be_, act, w.down_w, w.down8, w.down4, Tensor{}, out);
    }
  }
}

// A layer's first half on every row: the previous layer's MLP output (still in branch_) folded into the residual
// while normalising, the qkv projection, then rope and the KV write (q rotated in place in qkv_).
void LlmForward::attention_input(int index, int tokens, KvCache& kv) {
  const LlmConfig& c = desc_.llm;
  const LlmLayerWeights& w = w_.layers[size_t(index)];
  Tensor x = x_.rows(0, tokens), qkv = qkv_.rows(0, tokens);
  norm_input(x, index == 0 ? Tensor{} : branch_.rows(0, tokens), w.attn_norm, tokens);
  project_input(0, tokens, w.qkv_w, w.qkv8, w.qkv4, w.qkv_b, qkv);
  const Tensor positions = positions_.rows(0, tokens), slots = slots_.rows(0, tokens);
  if (c.qk_norm) {  // Qwen3: per-head q/k RMSNorm before rope
    be_.qk_norm_rope_kv_write(qkv, w.q_norm, w.k_norm, c.rms_eps, positions, slots, c.heads, c.kv_heads, c.head_dim,
                              c.rope_theta, kv.layers[size_t(index)]);
  } else {
    be_.rope_kv_write(qkv, positions, slots, c.heads, c.kv_heads, c.head_dim, c.rope_theta, kv.layers[size_t(index)]);
  }
}

// A layer's second half: attention of the q rows in `qkv` (described by `batch`) over the cache, the output
// projection into `branch`, the residual fold into `x` and the MLP, whose output stays in `branch`.
void LlmForward::attention_and_mlp(int index, const Tensor& qkv, const PagedAttentionBatch& batch, KvCache& kv,
                                   Tensor& x, Tensor& attn, Tensor& branch) {
  const LlmConfig& c = desc_.llm;
  const LlmLayerWeights& w = w_.layers[size_t(index)];
  const int rows = int(x.dim(0));
  be_.paged_attention(qkv, batch, kv.layers[size_t(index)], c.heads, c.kv_heads, c.head_dim, attn);
  apply_linear(be_, attn, w.o_w, w.o8, w.o4, Tensor{}, branch);
  norm_input(x, branch, w.ffn_norm, rows);
  mlp(w, rows, branch);
}

void LlmForward::layer(int index, int tokens, const PagedAttentionBatch& batch, KvCache& kv) {
  attention_input(index, tokens, kv);
  Tensor x = x_.rows(0, tokens), attn = attn_.rows(0, tokens), branch = branch_.rows(0, tokens);
  attention_and_mlp(index, qkv_.rows(0, tokens), batch, kv, x, attn, branch);
}

// The last layer of a step that samples fewer rows than it computes: every row still writes its K and V (later
// steps and shared prefixes read them), but only the sampled rows go on through attention and the MLP, gathered
// into last_x_ / sampled_qkv_, since nothing reads another row's output after this layer. Each sampled row is its
// chunk's last token, so its causal attention is over the chunk's whole context: one query row per sampled chunk
// (StepPlan::sampled_*). The MLP's output for them is left in last_branch_ for final_norm.
void LlmForward::last_layer_sampled(int index, const StepPlan& plan, KvCache& kv) {
  attention_input(index, plan.tokens, kv);
  const int samples = int(plan.sample_rows.size());
  if (samples == 0) return;
  const Tensor rows = sample_rows_.rows(0, samples);
  Tensor qkv = sampled_qkv_.rows(0, samples), x = last_x_.rows(0, samples);
  be_.gather_rows(qkv_.rows(0, plan.tokens), rows, qkv);
  be_.gather_rows(x_.rows(0, plan.tokens), rows, x);
  Tensor attn = attn_.rows(0, samples), branch = last_branch_.rows(0, samples);
  attention_and_mlp(index, qkv, sampled_batch_view(plan), kv, x, attn, branch);
}

void LlmForward::upload_inputs(const StepPlan& plan, bool sampled_only) {
  // Every input goes up before the first op. Uploads are stream-ordered (pinned staging, cudaMemcpyAsync on the
  // backend stream), so they land after the previous step's kernels have read these buffers.
  upload_ids(ids_, plan.ids);
  upload_ids(positions_, plan.positions);
  upload_ids(slots_, plan.slots);
  upload_ids(cu_q_, plan.cu_q);
  upload_ids(ctx_len_, plan.ctx_len);
  upload_ids(block_table_, plan.block_table);
  if (!plan.sample_rows.empty()) upload_ids(sample_rows_, plan.sample_rows);
  if (sampled_only && !plan.sample_rows.empty()) {
    upload_ids(sampled_ctx_len_, plan.sampled_ctx_len);
    upload_ids(sampled_block_table_, plan.sampled_block_table);
  }
  if (plan.answer_width > 0) upload_ids(answer_ids_, plan.answer_ids);
}

PagedAttentionBatch LlmForward::batch_view(const StepPlan& plan) const {
  PagedAttentionBatch batch;
  batch.cu_q = cu_q_.rows(0, plan.seqs + 1);
  batch.ctx_len = ctx_len_.rows(0, plan.seqs);
  batch.block_table = block_table_.rows(0, int64_t(plan.seqs) * plan.table_width).view({plan.seqs, plan.table_width});
  batch.num_seqs = plan.seqs;
  batch.max_q_len = plan.max_q_len;
  batch.max_ctx_len = plan.max_ctx_len;
  return batch;
}

// One query row (its chunk's last token) per sampled chunk, over the chunk's whole context.
PagedAttentionBatch LlmForward::sampled_batch_view(const StepPlan& plan) const {
  const int samples = int(plan.sample_rows.size());
  PagedAttentionBatch batch;
  batch.cu_q = sampled_cu_q_.rows(0, samples + 1);
  batch.ctx_len = sampled_ctx_len_.rows(0, samples);
  batch.block_table =
      sampled_block_table_.rows(0, int64_t(samples) * plan.table_width).view({samples, plan.table_width});
  batch.num_seqs = samples;
  batch.max_q_len = 1;
  batch.max_ctx_len = plan.sampled_max_ctx_len;
  return batch;
}

std::vector<SeqResult> LlmForward::run(const StepPlan& plan, const std::vector<SeqChunk>& chunks,
                                       const VisionPool& pool, KvCache& kv) {
  std::vector<SeqResult> results(chunks.size());
  if (plan.tokens == 0) return results;
  FOVEA_CHECK(plan.tokens <= sizes_.max_tokens && plan.seqs <= sizes_.max_seqs, "llm forward: plan too large");
  FOVEA_CHECK(kv.layers.size() == w_.layers.size(), "llm forward: kv cache has ", kv.layers.size(), " layers");
  if (graphs_.eligible(plan)) {
    const StepPlan padded = graphs_.pad(plan);
    upload_inputs(padded, /*sampled_only=*/false);
    graphs_.launch(padded, [&] { record_decode(padded, kv); });
    if (!plan.sample_rows.empty()) collect_head(plan, chunks, 0, int(plan.sample_rows.size()), results);
    return results;
  }
  const bool sampled_only = samples_last_layer_only(plan);
  upload_inputs(plan, sampled_only);
  embed(plan.tokens, plan.vision, &pool);
  const PagedAttentionBatch batch = batch_view(plan);
  const int last = int(w_.layers.size()) - 1;
  for (int l = 0; l < last; ++l) layer(l, plan.tokens, batch, kv);
  if (sampled_only) last_layer_sampled(last, plan, kv);
  else layer(last, plan.tokens, batch, kv);
  if (!plan.sample_rows.empty()) head(plan, chunks, results, /*rows_gathered=*/sampled_only);
  return results;
}

// Not while calibration observes the projections' inputs (fovea quantize): it needs every row of every layer.
bool LlmForward::samples_last_layer_only(const StepPlan& plan) {
  return int(plan.sample_rows.size()) < plan.tokens && !linear_inputs_observed();
}

// The whole padded decode step, head included (all rows are sampled), as one recordable op sequence.
void LlmForward::record_decode(const StepPlan& padded, KvCache& kv) {
  embed(padded.tokens, {}, nullptr);
  const PagedAttentionBatch batch = batch_view(padded);
  for (int l = 0; l < int(w_.layers.size()); ++l) layer(l, padded.tokens, batch, kv);
  final_norm(padded.tokens, int(padded.sample_rows.size()), /*rows_gathered=*/false);
  compute_head(0, int(padded.sample_rows.size()));
}

void LlmForward::final_norm(int tokens, int samples, bool rows_gathered) {
  // Only the sampled rows need the last residual add, the final norm and the LM head.
  Tensor last_x = last_x_.rows(0, samples), last_branch = last_branch_.rows(0, samples);
  Tensor last_normed = last_normed_.rows(0, samples);
  if (!rows_gathered) {
    const Tensor rows = sample_rows_.rows(0, samples);
    be_.gather_rows(x_.rows(0, tokens), rows, last_x);
    be_.gather_rows(branch_.rows(0, tokens), rows, last_branch);
  }
  be_.add_rms_norm(last_x, last_branch, w_.norm, desc_.llm.rms_eps, last_normed);
}

void LlmForward::head(const StepPlan& plan, const std::vector<SeqChunk>& chunks, std::vector<SeqResult>& results,
                      bool rows_gathered) {
  const int samples = int(plan.sample_rows.size());
  final_norm(plan.tokens, samples, rows_gathered);
  for (int first = 0; first < samples; first += sizes_.logits_rows) {
    const int count = std::min(sizes_.logits_rows, samples - first);
    compute_head(first, count);
    collect_head(plan, chunks, first, count, results);
  }
}

void LlmForward::compute_head(int first, int count) {
  Tensor logits = logits_.rows(0, count), ids = argmax_ids_.rows(0, count);
  be_.linear(last_normed_.rows(first, first + count), w_.lm_head, Tensor{}, logits);
  be_.argmax(logits, ids);
}

// Samples [first, first + count) have their logits in logits_ rows [0, count) and argmax in argmax_ids_.
void LlmForward::collect_head(const StepPlan& plan, const std::vector<SeqChunk>& chunks, int first, int count,
                              std::vector<SeqResult>& results) {
  const Tensor logits = logits_.rows(0, count), ids = argmax_ids_.rows(0, count);
  const int64_t width = plan.answer_width;
  Tensor logprobs;
  if (width > 0) {
    const Tensor ids_dev = answer_ids_.rows(first * width, (first + count) * width).view({count, width});
    logprobs = answer_logprobs_.rows(0, count * width).view({count, width});
    be_.log_softmax_gather(logits, ids_dev, logprobs);
  }
  const Tensor host_ids = be_.download(ids);
  const Tensor host_logprobs = width > 0 ? be_.download(logprobs) : Tensor{};
  for (int i = 0; i < count; ++i) {
    const size_t chunk = size_t(plan.sample_chunks[size_t(first + i)]);
    SeqResult& r = results[chunk];
    r.argmax = host_ids.ptr<int32_t>()[i];
    const size_t answers = chunks[chunk].answer_ids.size();
    const float* lp = answers ? host_logprobs.ptr<float>() + i * width : nullptr;
    r.answer_logprobs.assign(lp, lp + answers);
    if (chunks[chunk].want_logits) {
      const Tensor row = be_.download(logits.rows(i, i + 1));
      r.logits.assign(row.ptr<float>(), row.ptr<float>() + row.numel());
    }
  }
}

}  // namespace fovea
