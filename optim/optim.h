#pragma once
// Everything in optim/: optimizers, gradient clipping, lr schedulers, training checkpoints.
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "optim/training_checkpoint.h"
