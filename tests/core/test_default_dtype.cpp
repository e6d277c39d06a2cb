// One default dtype: every tensor factory makes Float32 unless told otherwise, as
// PyTorch's torch.get_default_dtype().
#include <catch2/catch.hpp>

#include <tapegrad/core/random.h>
#include <tapegrad/core/tensor.h>

using namespace tapegrad;

TEST_CASE("every tensor factory defaults to float32", "[core]") {
  CHECK(Tensor::empty({2}).dtype() == Dtype::Float32);
  CHECK(Tensor::zeros({2}).dtype() == Dtype::Float32);
  CHECK(Tensor::ones({2}).dtype() == Dtype::Float32);
  CHECK(Tensor::full({2}, 0.5).dtype() == Dtype::Float32);
  CHECK(Tensor::from_vector({1, 2}, {2}).dtype() == Dtype::Float32);
  CHECK(Tensor::scalar(1.5).dtype() == Dtype::Float32);
  CHECK(randn({2}).dtype() == Dtype::Float32);
  CHECK(uniform({2}, 0, 1).dtype() == Dtype::Float32);
  // float64 on request, with its precision: 0.1 survives exactly only in float64
  CHECK(Tensor::from_vector({0.1}, {1}, Dtype::Float64).item() == 0.1);
  CHECK(Tensor::from_vector({0.1}, {1}).item() == static_cast<double>(0.1f));
  CHECK(Tensor::scalar(0.1, Dtype::Float64).item() == 0.1);
  CHECK(Tensor::from_int64({1}, {1}).dtype() == Dtype::Int64);
}
