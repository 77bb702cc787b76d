// GLUE metrics (docs/model.md "The paper's settings"; the GLUE benchmark's definitions, which are those of
// scikit-learn and scipy): accuracy; F1 of the positive class (label id 1; MRPC, QQP);
// Matthews correlation (CoLA; scikit-learn's multi-class form, which is the usual phi
// coefficient for two classes); Pearson and Spearman correlation (STS-B; Spearman is the
// Pearson correlation of the ranks, ties getting their average rank).
// Conventions where a value is undefined (as scikit-learn's zero_division=0): F1 with no
// gold and no predicted positives is 0; a correlation with a constant input is 0.
// All sums are accumulated in double.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainer/finetune/tasks/tasks.h"

namespace tupe::finetune {

/// Metric name -> value ("accuracy", "f1", "mcc", "pearson", "spearman"), fractions in
/// [0, 1] (correlations in [-1, 1]).
using MetricValues = std::map<std::string, double>;

/// Fraction of equal entries. Throws tupe::Error on empty or unequal-length inputs (as all below).
double accuracy(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold);

/// F1 = 2 TP / (2 TP + FP + FN) of class `positive`.
double f1_score(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold, int64_t positive = 1);

/// Matthews correlation over K classes (labels in [0, K)), from the confusion matrix C with
/// t_k = gold count, p_k = predicted count, c = correct, s = total:
///   (c s - sum_k p_k t_k) / sqrt((s^2 - sum_k p_k^2) (s^2 - sum_k t_k^2)), 0 when the root is 0.
double matthews_corrcoef(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold);

/// Pearson's r = cov(x, y) / (sd(x) sd(y)) (two-pass, in double).
double pearson(const std::vector<double>& x, const std::vector<double>& y);

/// 1-based ranks with ties given their average rank (scipy.stats.rankdata "average").
std::vector<double> average_ranks(const std::vector<double>& values);

/// Spearman's rho = Pearson's r of the average ranks.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

/// The metrics reported for `task`, primary first: a custom task's own list; CoLA {mcc,
/// accuracy}; STS-B {pearson, spearman}; MRPC, QQP {accuracy, f1}; the others {accuracy}.
std::vector<std::string> metric_names(const TaskSpec& task);

/// Metrics of a classification task's predictions (label ids).
MetricValues classification_metrics(const TaskSpec& task, const std::vector<int64_t>& predicted,
                                     const std::vector<int64_t>& gold);

/// Metrics of a regression task's predictions (pearson, spearman).
MetricValues regression_metrics(const std::vector<double>& predicted, const std::vector<double>& gold);

}  // namespace tupe::finetune
