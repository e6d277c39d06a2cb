#pragma once
// All differentiable ops.
#include "core/ops/elementwise.h"
#include "core/ops/matmul.h"
#include "core/ops/reduce.h"
#include "core/ops/shape_ops.h"
