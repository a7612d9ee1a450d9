// A consumer that claims every visible message and dies before taking a
// lease, through the same public Transport a worker uses (issue 9,
// acceptance 4: "killed between claiming a message and taking the lease").
#pragma once

#include "runloom/backend.h"
#include "runloom/clock.h"

#include "gtest/gtest.h"

#include <string>
#include <vector>

namespace runloom::testing {

// Claims with a 1 ms visibility, expects `expect` messages, and waits until
// they are visible again. `queue_url` as BackendOptions::queue_url.
inline void ClaimAndDie(const std::string& db, size_t expect, const std::string& queue_url = "") {
  BackendOptions o;
  o.queue_url = queue_url;
  absl::StatusOr<Backend> b = OpenBackend(db, o);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<std::vector<QueueMessage>> m =
      b->transport->Claim("dies", 10, absl::Milliseconds(1));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->size(), expect);
  RealClock()->SleepFor(absl::Milliseconds(5));  // past the visibility
}

}  // namespace runloom::testing
