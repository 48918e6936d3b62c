// The LLM projections' canonical linears, dense or kept 4-bit (LoadOptions::keep_w4): the checkpoint's parts
// stacked by rows, then optionally regrouped. A packed linear that cannot stay exactly packed (see
// repack_w4) is dequantized like any packed weight, and the reason recorded in ModelDesc::w4.
#include <cstring>

#include "model/w4_repack.h"
#include "model/weight_map.h"

namespace fovea {
namespace {

Tensor stack(const std::vector<Tensor>& parts, const std::string& what) {
  return parts.size() == 1 ? parts[0] : concat_rows(parts, what);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.empty() || b.empty()) return a.empty() && b.empty();
  return a.dtype == b.dtype && a.shape == b.shape && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

// The parts repacked and stacked; false and *why_not when one cannot stay packed or their column orders differ
// (one perm serves the whole stacked linear).
bool stacked_w4(const SafetensorsSet& set, const std::vector<LinearPart>& parts, W4HostLinear* out,
                std::string* why_not) {
  std::vector<W4HostLinear> repacked(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const LinearPart& part = parts[i];
    const std::string where = str(set.file_of(part.name), ": ", part.name);
    if (!repack_w4(set.packed(part.name), set.quantization(), where, &repacked[i], why_not)) {
      *why_not = part.name + ": " + *why_not;
      return false;
    }
    const W4HostLinear& r = repacked[i];
    FOVEA_CHECK(r.codes.dim(0) == part.shape[0] && r.in == part.shape[1], where, " holds a packed [", r.codes.dim(0),
                ", ", r.in, "] weight, the config needs ", shape_str(part.shape));
    if (i > 0 && !same_bytes(r.perm, repacked[0].perm)) {
      *why_not = str(part.name, " and ", parts[0].name, " have different act-order column orders (g_idx)");
      return false;
    }
  }
  std::vector<Tensor> codes, params;
  for (const W4HostLinear& r : repacked) {
    codes.push_back(r.codes);
    params.push_back(r.params);
  }
  *out = repacked[0];
  out->codes = stack(codes, parts[0].name + " (4-bit codes)");
  out->params = stack(params, parts[0].name + " (4-bit params)");
  return true;
}

}  // namespace

void put_linear(const SafetensorsSet& set, const std::vector<LinearPart>& parts, const RowRegroup& regroup,
                ModelDesc* desc, ModelWeights* out, const std::string& dst) {
  bool packed = desc->w4.kept_packed;
  for (const LinearPart& part : parts) packed = packed && set.is_packed(part.name);
  if (packed) {
    W4HostLinear w4;
    std::string why_not;
    if (stacked_w4(set, parts, &w4, &why_not)) {
      out->tensors[dst + ".w4.codes"] = regroup ? regroup(w4.codes) : w4.codes;
      out->tensors[dst + ".w4.params"] = regroup ? regroup(w4.params) : w4.params;
      if (!w4.perm.empty()) out->tensors[dst + ".w4.perm"] = w4.perm;
      ++desc->w4.packed_linears;
      return;
    }
    desc->w4.dequantized.push_back(dst + ": " + why_not);
  }
  std::vector<Tensor> dense;
  for (const LinearPart& part : parts) dense.push_back(set.get(part.name, part.shape));
  const Tensor weight = stack(dense, parts[0].name);
  out->tensors[dst + ".weight"] = regroup ? regroup(weight) : weight;
}

}  // namespace fovea
