#pragma once
// The chapter's claims judged from one study's numbers: one verdict per claim, each with its
// rule, its margin and the seeds behind it, and the constant predictor every loss is read
// against.
#include <string>
#include <vector>

#include "kit/stats.h"
#include "study.h"

namespace bnexp {

/// A constant predictor: the mean of y over the train split, per seed; its MSE on the train
/// split (the variance of y_train, divided by n) and on the test split, as mean ± std over
/// the study's seeds. Every net whose test loss is at or above `test` has learnt nothing
/// that generalises.
struct Baseline {
  MeanStd train, test;
};
/// The baseline over the seeds options.seed .. options.seed + options.seeds - 1 (the data of
/// make_chapter_data, as the runs use it).
Baseline constant_predictor(const StudyOptions& options);

/// One chapter claim judged from this run.
struct Verdict {
  std::string claim;     ///< e.g. "BN converges faster"
  std::string setup;     ///< the experiment, lr and evaluation policy it is judged on
  std::string verdict;   ///< "holds", "does not hold", "not supported" or "not measured"
  std::string evidence;  ///< the numbers: per arm, the margin, the seeds
  std::string rule;      ///< how the verdict follows from the numbers
};

/// The verdicts of every claim whose experiment is in `s` ("not measured" for the others),
/// judged under the first evaluation policy of the study (eval mode unless the preset or
/// --eval-policy says train). The claims: the normalised net (1) converges faster,
/// (2) descends more smoothly, (3) tolerates larger learning rates, (4) keeps deep nets
/// trainable; (5) plain deep nets crash; and, as the frame for every test loss, (6) some net
/// beats the constant predictor on the test set. Seed pairs share data, initial Linear weights and
/// batch order, so the rules compare the two nets seed by seed.
std::vector<Verdict> judge_claims(const StudyResult& s);

/// The verdicts as a Markdown section ("## Verdicts", a table and the rules).
std::string verdicts_markdown(const std::vector<Verdict>& v, const Baseline& b);
/// The verdicts as console lines: "claim: verdict (evidence)".
std::string verdicts_text(const std::vector<Verdict>& v);

}  // namespace bnexp
