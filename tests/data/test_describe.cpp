// data/describe.h (how the data folder's messages print shapes and tensors) and
// data::image_size_refusal (the size check of both image decoders).
#include <catch2/catch.hpp>

#include <stdexcept>

#include <tapegrad/core/core.h>
#include <tapegrad/data/describe.h>
#include <tapegrad/data/image.h>

using namespace tapegrad;

TEST_CASE("describe: tuple_str and describe_tensor", "[describe]") {
  REQUIRE(data::tuple_str({}) == "()");
  REQUIRE(data::tuple_str({7}) == "(7)");
  REQUIRE(data::tuple_str({3, 28, 28}) == "(3, 28, 28)");
  REQUIRE(data::describe_tensor(Tensor()) == "an undefined tensor");
  REQUIRE(data::describe_tensor(Tensor::zeros({2, 3}, Dtype::Float64)) == "float64 (2, 3)");
}

TEST_CASE("describe: check_float_image accepts float32 (C, H, W) only", "[describe]") {
  REQUIRE_NOTHROW(data::check_float_image("f", Tensor::zeros({1, 2, 2}, Dtype::Float32)));
  REQUIRE_THROWS_MATCHES(data::check_float_image("f", Tensor::zeros({2, 2}, Dtype::Float32)), std::invalid_argument,
                         Catch::Message("f: expected a float32 image (C, H, W), got float32 (2, 2)"));
  REQUIRE_THROWS_MATCHES(data::check_float_image("f", Tensor::zeros({1, 2, 2}, Dtype::Int64)), std::invalid_argument,
                         Catch::Message("f: expected a float32 image (C, H, W), got int64 (1, 2, 2)"));
  REQUIRE_THROWS_MATCHES(data::check_float_image("f", Tensor()), std::invalid_argument,
                         Catch::Message("f: expected a float32 image (C, H, W), got an undefined tensor"));
}

TEST_CASE("image_size_refusal: 1 <= W, H and W * H <= max_pixels", "[describe]") {
  REQUIRE(data::image_size_refusal(1, 1, 1).empty());
  REQUIRE(data::image_size_refusal(4, 3, 12).empty());
  REQUIRE(data::image_size_refusal(4, 3, 11) == "size 4 x 3 (W x H) is outside 1 .. 11 pixels");
  REQUIRE(data::image_size_refusal(0, 3, 100) == "size 0 x 3 (W x H) is outside 1 .. 100 pixels");
  REQUIRE(data::image_size_refusal(3, 0, 100) == "size 3 x 0 (W x H) is outside 1 .. 100 pixels");
}
