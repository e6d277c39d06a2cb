#pragma once
// All differentiable ops.
#include <tapegrad/core/ops/activation.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/core/ops/matmul.h>
#include <tapegrad/core/ops/reduce.h>
#include <tapegrad/core/ops/shape_ops.h>
#include <tapegrad/core/ops/unary.h>
#include <tapegrad/core/ops/minmax.h>
#include <tapegrad/core/ops/compare.h>
#include <tapegrad/core/ops/softmax.h>
#include <tapegrad/core/ops/view_ops.h>
#include <tapegrad/core/ops/index_ops.h>
