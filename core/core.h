#pragma once
// Umbrella header for the core: tensors, autograd, ops, randomness, gradcheck.
#include <tapegrad/core/autograd.h>
#include <tapegrad/core/dtype.h>
#include <tapegrad/core/gradcheck.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/core/random.h>
#include <tapegrad/core/tensor.h>
