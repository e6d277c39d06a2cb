#pragma once
// All differentiable ops.
#include "core/ops/activation.h"
#include "core/ops/elementwise.h"
#include "core/ops/matmul.h"
#include "core/ops/reduce.h"
#include "core/ops/shape_ops.h"
#include "core/ops/unary.h"
#include "core/ops/minmax.h"
#include "core/ops/softmax.h"
#include "core/ops/view_ops.h"
#include "core/ops/index_ops.h"
