#pragma once
// Umbrella header for the core: tensors, autograd, ops, randomness, gradcheck.
#include "core/autograd.h"
#include "core/dtype.h"
#include "core/gradcheck.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/random.h"
#include "core/tensor.h"
