#pragma once
// How the data folder's error messages print what they got: shapes as "(2, 3)", tensors as
// "float32 (3, 28, 28)", and the float32 image (C, H, W) check of the image transforms.
#include <string>

#include <tapegrad/core/shape.h>
#include <tapegrad/core/tensor.h>

namespace tapegrad::data {

/// "(2, 3)": a shape in parentheses, as the image functions' messages print (C, H, W) shapes
/// (core's shape_str prints "[2, 3]").
std::string tuple_str(const Shape& s);

/// "float32 (3, 28, 28)" (dtype, then tuple_str of the shape), or "an undefined tensor": the
/// "got ..." part of an input error.
std::string describe_tensor(const Tensor& t);

/// Throws std::invalid_argument "<who>: expected a float32 image (C, H, W), got
/// <describe_tensor(image)>" unless `image` is a defined 3-d float32 tensor.
void check_float_image(const char* who, const Tensor& image);

}  // namespace tapegrad::data
