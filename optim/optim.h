#pragma once
// Everything in optim/: optimizers, gradient clipping, lr schedulers, training checkpoints.
#include <tapegrad/optim/adam.h>
#include <tapegrad/optim/clip_grad.h>
#include <tapegrad/optim/lr_scheduler.h>
#include <tapegrad/optim/optimizer.h>
#include <tapegrad/optim/rmsprop.h>
#include <tapegrad/optim/sgd.h>
#include <tapegrad/optim/training_checkpoint.h>
