#pragma once
// The training room in one include: fit() and its options (fit.h), the callbacks (progress
// bar, early stopping, best/last checkpoints, metrics log, learning curves), evaluation and
// prediction (evaluate.h; the batch loop under them: evaluate_batches.h), metrics (metrics.h), data-parallel runs (data_parallel.h).
// docs/training.md walks through them.
#include <tapegrad/train/callback.h>
#include <tapegrad/train/data_parallel.h>
#include <tapegrad/train/early_stopping.h>
#include <tapegrad/train/evaluate.h>
#include <tapegrad/train/evaluate_batches.h>
#include <tapegrad/train/fit.h>
#include <tapegrad/train/gnuplot.h>
#include <tapegrad/train/learning_curves.h>
#include <tapegrad/train/metrics.h>
#include <tapegrad/train/metrics_log.h>
#include <tapegrad/train/model_checkpoint.h>
#include <tapegrad/train/progress_bar.h>
