// Load-time check that the float weights hold no NaN or infinity: such a checkpoint otherwise loads and answers
// token 0 for every request without any error.
#pragma once
#include "model/model_desc.h"

namespace fovea {

// Scans every element of every F32/F16/BF16/F8E4M3 tensor (a full check, not a sample), reading the weights one at a
// time. Throws naming the first bad tensor found. The runner checks each weight as it reads it for the upload
// (runtime/checkpoint_source.cc) instead.
void check_weights_finite(const ModelWeights& weights, const std::string& model_dir);

// The same for one tensor (split over the global thread pool when large); throws naming `name`.
void check_tensor_finite(const std::string& name, const Tensor& tensor, const std::string& model_dir);

// Number of non-finite elements in one tensor (0 for integer dtypes); exposed for tests.
int64_t count_non_finite(const Tensor& tensor);

}  // namespace fovea
