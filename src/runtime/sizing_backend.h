// A backend that only counts: alloc() hands out tensors with no memory behind them (distinct addresses that are never
// dereferenced), memory calls do nothing, and it reports the dtypes and W4 workspace of the device being planned for.
// The memory planner (runtime/memory_plan.h) builds the whole runner on it, with a weight source that writes nothing,
// to learn what the real runner would allocate, before anything is loaded. No op may run on it: they are the CPU
// reference's, inherited only so the interface is complete (and stays so as ops are added).
#pragma once
#include <functional>

#include "backend/cpu/cpu_backend.h"

namespace fovea {

// The device a plan is for.
struct SizingTarget {
  Device device = Device::CUDA;
  DType compute_dtype = DType::BF16;
  DType weight_dtype = DType::BF16;
  // Backend::linear_w4_workspace_bytes of that device; null: 0 (the CPU reference needs none).
  std::function<size_t(int64_t n, int64_t k, int64_t group, bool permuted)> w4_workspace;
  // Device bytes one allocation of that many bytes takes, the allocator's rounding included; null: exactly those.
  std::function<size_t(size_t bytes)> allocation_bytes;
};

class SizingBackend final : public CpuBackend {
 public:
  explicit SizingBackend(SizingTarget target) : target_(std::move(target)) {}

  Device device() const override { return target_.device; }
  std::string name() const override { return "sizing"; }
  DType compute_dtype() const override { return target_.compute_dtype; }
  DType weight_dtype() const override { return target_.weight_dtype; }

  Tensor alloc(DType dtype, const Shape& shape) override;
  void upload(Tensor& dst, const Tensor& host_src) override;
  Tensor download(const Tensor& src) override;
  void copy(Tensor&, const Tensor&) override {}
  void fill_zero(Tensor&) override {}
  void fill_random(Tensor&, const RandomFill&) override {}
  void scale_rows(Tensor&, const Tensor&) override {}  // the loader's fold of a layer scale: nothing to change
  void synchronize() override {}
  size_t memory_in_use() const override { return bytes_; }
  // What the device's allocator adds to memory_in_use() by rounding each allocation (SizingTarget::allocation_bytes).
  size_t allocator_rounding() const { return rounding_; }
  size_t linear_w4_workspace_bytes(int64_t n, int64_t k, int64_t group, bool permuted) const override {
    return target_.w4_workspace ? target_.w4_workspace(n, k, group, permuted) : 0;
  }

 private:
  SizingTarget target_;
  size_t bytes_ = 0;
  size_t rounding_ = 0;
  uintptr_t next_address_ = uintptr_t(1) << 40;  // far from anything real; only ever offset, never read
};

}  // namespace fovea
