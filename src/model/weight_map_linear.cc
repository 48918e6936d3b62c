// The LLM projections' canonical linears, dense or kept 4-bit (LoadOptions::keep_w4): the checkpoint's parts
// stacked by rows, then optionally regrouped, all when the weight is loaded. Whether a packed linear can stay
// packed is decided here, from its shapes, scales and g_idx (model/w4_repack.h's plan); one that cannot is
// dequantized like any packed weight, and the reason recorded in ModelDesc::w4.
#include <memory>

#include "backend/w4_layout.h"
#include "model/w4_repack.h"
#include "model/weight_map.h"

namespace fovea {
namespace {

// Whether the parts can stay packed as one stacked linear: each can, its dims are the config's, and they share one
// column order (one perm serves the whole stacked linear). False and *why_not otherwise.
bool stackable_w4(const SafetensorsSet& set, const std::vector<LinearPart>& parts, W4RepackPlan* first,
                  std::string* why_not) {
  for (size_t i = 0; i < parts.size(); ++i) {
    const LinearPart& part = parts[i];
    const std::string where = str(set.file_of(part.name), ": ", part.name);
    W4RepackPlan plan;
    if (!plan_repack_w4(set.packed(part.name), set.quantization(), where, &plan, why_not)) {
      *why_not = part.name + ": " + *why_not;
      return false;
    }
    FOVEA_CHECK(plan.dims.out == part.shape[0] && plan.dims.in == part.shape[1], where, " holds a packed [",
                plan.dims.out, ", ", plan.dims.in, "] weight, the config needs ", shape_str(part.shape));
    if (i == 0) {
      *first = plan;
    } else if (plan.order != first->order) {
      *why_not = str(part.name, " and ", parts[0].name, " have different act-order column orders (g_idx)");
      return false;
    }
  }
  return true;
}

// The repacked, stacked (and regrouped) codes, params and perm of one linear, made once for the three weights
// that read them and dropped when all three were taken (the uploader takes them one after the other).
class StackedW4 {
 public:
  enum Piece { kCodes, kParams, kPerm };
  StackedW4(std::shared_ptr<const SafetensorsSet> set, std::vector<LinearPart> parts, RowRegroup regroup, bool permuted)
      : set_(std::move(set)), parts_(std::move(parts)), regroup_(std::move(regroup)), pieces_(permuted ? 3 : 2) {}

  Tensor take(Piece piece) {
    if (made_[piece].empty()) {  // the first ask, or one asked again: (re)make all of them
      make();
      taken_ = 0;
    }
    Tensor t = made_[piece];
    made_[piece] = Tensor{};
    if (++taken_ >= pieces_) {
      for (Tensor& m : made_) m = Tensor{};
      taken_ = 0;
    }
    return t;
  }

 private:
  void make() {
    std::vector<Tensor> codes, params;
    for (const LinearPart& part : parts_) {
      const std::string where = str(set_->file_of(part.name), ": ", part.name);
      W4HostLinear r;
      std::string why_not;
      FOVEA_CHECK(repack_w4(set_->packed(part.name), set_->quantization(), where, &r, &why_not), where, ": ", why_not);
      codes.push_back(std::move(r.codes));
      params.push_back(std::move(r.params));
      made_[kPerm] = r.perm;
    }
    made_[kCodes] = stack(codes, " (4-bit codes)");
    made_[kParams] = stack(params, " (4-bit params)");
  }
  Tensor stack(const std::vector<Tensor>& parts, const char* what) const {
    const Tensor stacked = parts.size() == 1 ? parts[0] : concat_rows(parts, parts_[0].name + what);
    return regroup_ ? regroup_(stacked) : stacked;
  }

  std::shared_ptr<const SafetensorsSet> set_;
  std::vector<LinearPart> parts_;
  RowRegroup regroup_;
  int pieces_;
  int taken_ = 0;
  Tensor made_[3];
};

}  // namespace

void put_linear(const SafetensorsSet& set, const std::vector<LinearPart>& parts, const RowRegroup& regroup,
                ModelDesc* desc, ModelWeights* out, const std::string& dst) {
  bool packed = desc->w4.kept_packed;
  for (const LinearPart& part : parts) packed = packed && set.is_packed(part.name);
  if (packed) {
    W4RepackPlan plan;
    std::string why_not;
    if (stackable_w4(set, parts, &plan, &why_not)) {
      const int64_t in = plan.dims.in, rows = [&] {
        int64_t n = 0;
        for (const LinearPart& part : parts) n += part.shape[0];
        return n;
      }();
      const bool permuted = !plan.order.empty();
      auto made = std::make_shared<StackedW4>(set.shared_from_this(), parts, regroup, permuted);
      out->tensors[dst + ".w4.codes"] =
          WeightRef(DType::I32, {rows, w4::code_words(in)}, [made] { return made->take(StackedW4::kCodes); });
      out->tensors[dst + ".w4.params"] =
          WeightRef(DType::I32, {rows, in / plan.dims.group}, [made] { return made->take(StackedW4::kParams); });
      if (permuted)
        out->tensors[dst + ".w4.perm"] = WeightRef(DType::I32, {in}, [made] { return made->take(StackedW4::kPerm); });
      ++desc->w4.packed_linears;
      return;
    }
    desc->w4.dequantized.push_back(dst + ": " + why_not);
  }
  std::vector<WeightRef> dense;
  for (const LinearPart& part : parts) dense.push_back(set.ref(part.name, part.shape));
  const WeightRef weight = stack_rows(dense, parts[0].name);
  out->tensors[dst + ".weight"] = regroup ? transform(weight, regroup) : weight;
}

}  // namespace fovea
