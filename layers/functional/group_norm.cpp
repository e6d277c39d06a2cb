#include <tapegrad/layers/functional/group_norm.h>

#include <stdexcept>
#include <string>

#include <tapegrad/layers/functional/grouped_norm.h>

namespace tapegrad::layers::functional {

Tensor group_norm(const Tensor& x, std::int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  if (!x.defined() || x.dim() < 2)
    throw std::invalid_argument("group_norm: expected input of shape (N, C, *), got " +
                                (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor")));
  const std::int64_t C = x.size(1);
  if (num_groups <= 0 || C % num_groups != 0)
    throw std::invalid_argument("group_norm: expected num_channels (" + std::to_string(C) +
                                ") to be divisible by num_groups (" + std::to_string(num_groups) +
                                "), input of shape " + shape_str(x.shape()));
  for (const auto* t : {&weight, &bias})
    if (t->defined() && t->shape() != Shape{C})
      throw std::invalid_argument(std::string("group_norm: expected ") + (t == &weight ? "weight" : "bias") +
                                  " of shape [" + std::to_string(C) + "] for input of shape " + shape_str(x.shape()) +
                                  ", got " + shape_str(t->shape()));
  std::int64_t S = 1;
  for (std::int64_t i = 2; i < x.dim(); ++i) S *= x.size(i);
  return detail::grouped_norm(x, C, S, num_groups, weight, bias, eps, "group_norm");
}

}  // namespace tapegrad::layers::functional
