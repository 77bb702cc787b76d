// Counting the ATen operators a piece of code dispatches, for tests and benchmarks:
//
//   tupe::testing::OpCounter counter;   // starts counting on this thread
//   optimizer.step(lr);
//   counter.total();                     // top-level ops dispatched so far
//   counter.counts();                    // {"aten::_fused_adamw_": 2, ...}
//
// Uses a thread-local at::RecordFunction callback (ATen/record_function.h) on scope
// FUNCTION, which the dispatcher opens for every operator call. Only top-level calls are
// counted: ops that an op runs inside itself (a foreach op's per-tensor fallback, the
// kernels of a composite op) are nested and ignored. Ops run by other threads (intra-op
// workers, a data loader) are not seen. One OpCounter per thread at a time.
#pragma once
#include <ATen/record_function.h>

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

namespace tupe::testing {

class OpCounter {
 public:
  /// Starts counting on the calling thread. Throws std::logic_error when another
  /// OpCounter is counting on this thread.
  OpCounter() {
    State& s = state();
    if (s.active) throw std::logic_error("OpCounter: another counter is active on this thread");
    s = State{};
    s.active = true;
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&on_start, &on_end).scopes({at::RecordScope::FUNCTION}));
    running_ = true;
  }
  ~OpCounter() { stop(); }
  OpCounter(const OpCounter&) = delete;
  OpCounter& operator=(const OpCounter&) = delete;

  /// Stops counting (idempotent); total() and counts() keep the final values.
  void stop() {
    if (!running_) return;
    at::removeCallback(handle_);
    running_ = false;
    counts_ = state().counts;
    state() = State{};
  }

  /// Forgets what was counted so far (keeps counting when running).
  void reset() {
    counts_.clear();
    if (running_) state().counts.clear();
  }

  /// Top-level ops dispatched while counting, by name ("aten::add_", ...).
  std::map<std::string, int64_t> counts() const { return running_ ? state().counts : counts_; }

  /// Sum of counts().
  int64_t total() const {
    int64_t sum = 0;
    for (const auto& [name, n] : counts()) sum += n;
    return sum;
  }

  /// "aten::add_ x2, aten::mul x1" (by name), for test and benchmark output.
  std::string summary() const {
    std::string out;
    for (const auto& [name, n] : counts()) out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n);
    return out;
  }

 private:
  struct State {
    bool active = false;
    int depth = 0;  ///< open RecordFunctions of this thread (>0: the next one is nested)
    std::map<std::string, int64_t> counts;
  };
  static State& state() {
    thread_local State s;
    return s;
  }
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    State& s = state();
    if (s.active && s.depth == 0) ++s.counts[fn.name()];
    ++s.depth;
    return nullptr;
  }
  static void on_end(const at::RecordFunction& /*fn*/, at::ObserverContext* /*ctx*/) {
    State& s = state();
    if (s.depth > 0) --s.depth;
  }

  at::CallbackHandle handle_ = 0;
  bool running_ = false;
  std::map<std::string, int64_t> counts_;  ///< the final counts once stopped
};

}  // namespace tupe::testing
