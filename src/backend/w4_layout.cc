#include "backend/w4_layout.h"

#include "backend/backend.h"

namespace fovea::w4 {

void check_weight(const W4Weight& w, Device device, const char* op) {
  FOVEA_CHECK(!w.empty(), op, ": empty W4 weight");
  FOVEA_CHECK(w.k > 0 && w.group > 0 && w.k % w.group == 0, op, ": group ", w.group, " does not divide K = ", w.k);
  const int64_t n = w.n();
  for (const Tensor* t : {&w.codes, &w.params, &w.perm, &w.inverse_perm})
    FOVEA_CHECK(t->empty() || t->device == device, op, ": W4 weight tensors must be on the backend's device");
  check_tensor(w.codes, DType::I32, {n, code_words(w.k)}, "W4 codes");
  check_tensor(w.params, DType::I32, {n, w.k / w.group}, "W4 params");
  FOVEA_CHECK(w.perm.empty() == w.inverse_perm.empty(), op, ": W4 perm and inverse_perm come together");
  if (!w.perm.empty()) {
    check_tensor(w.perm, DType::I32, {w.k}, "W4 perm");
    check_tensor(w.inverse_perm, DType::I32, {w.k}, "W4 inverse_perm");
  }
}

}  // namespace fovea::w4
