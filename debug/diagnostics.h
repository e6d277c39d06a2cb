#pragma once
// Module-mode diagnostics: mode_report, ModeAudit, batch_dependence, buffers_changed,
// running_stats_gap and the BatchNorm backward invariants.
#include "debug/batch_dependence.h"
#include "debug/bn_grad_check.h"
#include "debug/buffers.h"
#include "debug/mode_audit.h"
#include "debug/mode_report.h"
#include "debug/row_selection.h"
#include "debug/stats_gap.h"
