// ExecutorPool: the dispatcher thread and the executor threads.
//
// One dispatcher claims queue messages for the idle executors in one
// transport call (one write for many runs), never more than there are idle
// executors, so nothing waits claimed behind a busy executor. Each executor
// takes a claimed message and runs its run to an end through the
// RunLauncher, acking the message once the lease is held (or at once when
// the run is not runnable). On Stop the dispatcher gives back what no
// executor started.
//
// Each run executes on a fiber (core/fiber.h). A run that waits (a model
// call's latency or its slot under the concurrency cap, a sleep, a retry's
// backoff) suspends its fiber and gives its executor back; the executor runs
// a woken fiber first, else starts the next claimed run. So the executors
// bound the runs computing or blocking (an exec step blocks its executor)
// and `runs_in_flight` bounds the runs held at once; the dispatcher claims
// only while an executor is idle, so work that never waits holds no more
// runs than there are executors. A transport call that fails (claim, ack, release) is
// logged with the run id; the message is delivered again later.
//
// Thread-safety: Start() and Stop() may be called from any thread; mu_
// guards the claimed-message queue, the idle count and the threads.
#pragma once

#include "runloom/clock.h"
#include "runloom/env.h"
#include "runloom/mutex.h"
#include "runloom/transport.h"

#include "core/fiber.h"
#include "engine/service/run_launcher.h"

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

#include <deque>
#include <string>
#include <thread>
#include <vector>

namespace runloom::engine_internal {

struct ExecutorPoolOptions {
  std::string owner;  // the claimer's name
  int executors = 1;
  // Runs held at once (their fibers); below `executors` = `executors`.
  int runs_in_flight = 0;
  bool batch_scheduling = true;  // see EngineOptions::batch_scheduling
  absl::Duration visibility_timeout;
  absl::Duration idle_poll;
};

// One executor's work on one claimed message: executes its run through
// `launcher`, acking `m` once the lease is held (or at once when the run is
// not runnable or is leased elsewhere), and logs what went wrong. Returns
// the execution's status. The executor threads' loop body, and the
// simulator's (engine_driver.h).
absl::Status ExecuteMessage(const QueueMessage& m, Transport* transport, RunLauncher* launcher,
                            Logger* logger);

class ExecutorPool final : public fiber::Host {
 public:
  // Every pointer must outlive the pool.
  ExecutorPool(ExecutorPoolOptions options, Transport* transport, Clock* clock,
               RunLauncher* launcher, Logger* logger)
      : options_(std::move(options)),
        transport_(transport),
        clock_(clock),
        launcher_(launcher),
        logger_(logger) {}
  ~ExecutorPool() override { Join(); }
  ExecutorPool(const ExecutorPool&) = delete;
  ExecutorPool& operator=(const ExecutorPool&) = delete;

  // Starts the executors and the dispatcher. Idempotent while running.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // No new claims, no new runs started (runs in flight go on).
  void StopDispatch() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for every thread to end, after every run held has ended.
  // REQUIRES: StopDispatch() first.
  void Join() ABSL_LOCKS_EXCLUDED(mu_);

  // fiber::Host: a woken run's fiber, to be resumed by an executor.
  void Ready(fiber::Fiber* f) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void DispatcherLoop() ABSL_LOCKS_EXCLUDED(mu_);
  void ExecutorLoop() ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const ExecutorPoolOptions options_;
  Transport* const transport_;
  Clock* const clock_;
  RunLauncher* const launcher_;
  Logger* const logger_;

  runloom::Mutex mu_;
  // Claimed messages waiting for an executor, and how many executors wait.
  std::deque<QueueMessage> work_ ABSL_GUARDED_BY(mu_);
  int idle_executors_ ABSL_GUARDED_BY(mu_) = 0;
  // Woken fibers waiting for an executor, and the fibers alive (runs held).
  std::deque<fiber::Fiber*> ready_ ABSL_GUARDED_BY(mu_);
  int fibers_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_dispatch_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom::engine_internal
