#include "trainer/finetune/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"

namespace tupe::finetune {

namespace {

template <class T>
void check_sizes(const std::vector<T>& a, const std::vector<T>& b, const char* what) {
  TUPE_CHECK(!a.empty() && a.size() == b.size(),
             what << ": need two non-empty inputs of equal length, got " << a.size() << " and " << b.size());
}

}  // namespace

double accuracy(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold) {
  check_sizes(predicted, gold, "accuracy");
  size_t correct = 0;
  for (size_t i = 0; i < gold.size(); ++i) correct += predicted[i] == gold[i] ? 1 : 0;
  return static_cast<double>(correct) / static_cast<double>(gold.size());
}

double f1_score(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold, int64_t positive) {
  check_sizes(predicted, gold, "f1");
  double tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    const bool p = predicted[i] == positive, g = gold[i] == positive;
    tp += (p && g) ? 1 : 0;
    fp += (p && !g) ? 1 : 0;
    fn += (!p && g) ? 1 : 0;
  }
  const double denominator = 2 * tp + fp + fn;
  return denominator == 0 ? 0.0 : 2 * tp / denominator;
}

double matthews_corrcoef(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold) {
  check_sizes(predicted, gold, "mcc");
  int64_t k = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    TUPE_CHECK(predicted[i] >= 0 && gold[i] >= 0, "mcc: labels must be >= 0, got " << predicted[i] << ", " << gold[i]);
    k = std::max({k, predicted[i] + 1, gold[i] + 1});
  }
  std::vector<double> t(static_cast<size_t>(k), 0.0), p(static_cast<size_t>(k), 0.0);
  double c = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    t[static_cast<size_t>(gold[i])] += 1;
    p[static_cast<size_t>(predicted[i])] += 1;
    c += predicted[i] == gold[i] ? 1 : 0;
  }
  const double s = static_cast<double>(gold.size());
  double pt = 0, pp = 0, tt = 0;
  for (size_t j = 0; j < t.size(); ++j) {
    pt += p[j] * t[j];
    pp += p[j] * p[j];
    tt += t[j] * t[j];
  }
  const double denominator = std::sqrt((s * s - pp) * (s * s - tt));
  return denominator == 0 ? 0.0 : (c * s - pt) / denominator;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  check_sizes(x, y, "pearson");
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double dx = x[i] - mx, dy = y[i] - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (sxx == 0 || syy == 0) return 0.0;
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

std::vector<double> average_ranks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;  // 1-based average
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
    i = j + 1;
  }
  return ranks;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  check_sizes(x, y, "spearman");
  return pearson(average_ranks(x), average_ranks(y));
}

std::vector<std::string> metric_names(const TaskSpec& task) {
  if (!task.metrics.empty()) return task.metrics;
  if (task.kind == TaskKind::kRegression) return {"pearson", "spearman"};
  if (task.primary_metric == "mcc") return {"mcc", "accuracy"};
  if (task.name == "MRPC" || task.name == "QQP") return {"accuracy", "f1"};
  return {"accuracy"};
}

MetricValues classification_metrics(const TaskSpec& task, const std::vector<int64_t>& predicted,
                                    const std::vector<int64_t>& gold) {
  MetricValues out;
  for (const auto& name : metric_names(task)) {
    if (name == "accuracy") out[name] = accuracy(predicted, gold);
    else if (name == "f1") out[name] = f1_score(predicted, gold, 1);
    else if (name == "mcc") out[name] = matthews_corrcoef(predicted, gold);
    else TUPE_FAIL("metrics: " << task.name << " has no classification metric '" << name << "'");
  }
  return out;
}

MetricValues regression_metrics(const std::vector<double>& predicted, const std::vector<double>& gold) {
  // Both correlations always (cheap); a custom task's metrics list orders the report.
  return {{"pearson", pearson(predicted, gold)}, {"spearman", spearman(predicted, gold)}};
}

}  // namespace tupe::finetune
