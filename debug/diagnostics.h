#pragma once
// Module-mode diagnostics: mode_report, ModeAudit, batch_dependence, buffers_changed,
// running_stats_gap and the BatchNorm backward invariants.
#include <tapegrad/debug/batch_dependence.h>
#include <tapegrad/debug/bn_grad_check.h>
#include <tapegrad/debug/buffers.h>
#include <tapegrad/debug/mode_audit.h>
#include <tapegrad/debug/mode_report.h>
#include <tapegrad/debug/row_selection.h>
#include <tapegrad/debug/stats_gap.h>
#include <tapegrad/debug/warnings.h>
