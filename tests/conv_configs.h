#pragma once
// The Conv2d configurations the conv tests share: strides, padding, dilation, groups
// (incl. depthwise), odd and rectangular sizes, 1x1, a kernel as large as the input.
#include <cstdint>
#include <vector>

#include <tapegrad/layers/functional/conv.h>

namespace tapegrad::test {

using layers::functional::Size2;

struct Cfg {
  std::int64_t N, C, H, W, O, kh, kw;
  Size2 s, p, d;
  std::int64_t g;
  bool bias;
};

inline const std::vector<Cfg> kConfigs = {
    {2, 3, 5, 5, 4, 3, 3, 1, 0, 1, 1, true},             // plain
    {2, 2, 4, 5, 3, 3, 3, 1, 1, 1, 1, false},            // same padding, no bias
    {1, 3, 7, 6, 2, 3, 3, 2, 1, 1, 1, true},             // stride 2, odd sizes
    {1, 2, 3, 7, 2, 1, 3, {1, 2}, {0, 1}, 1, 1, true},   // rectangular kernel and stride
    {2, 1, 6, 6, 2, 3, 3, 1, 2, 2, 1, true},             // dilation 2
    {1, 2, 7, 8, 2, 2, 3, {2, 3}, {1, 0}, {2, 1}, 1, true},  // mixed everything
    {2, 4, 4, 4, 6, 3, 3, 1, 1, 1, 2, true},             // groups 2
    {2, 3, 5, 4, 3, 3, 3, 1, 1, 1, 3, false},            // depthwise
    {2, 4, 3, 3, 2, 1, 1, 1, 0, 1, 1, true},             // 1x1 (the image is its own im2col)
    {1, 2, 5, 5, 3, 5, 5, 1, 0, 1, 1, true},             // kernel = input
};

}  // namespace tapegrad::test
