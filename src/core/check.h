// RUNLOOM_CHECK(cond) << msg: aborts on a broken invariant (on in release).
// RUNLOOM_DCHECK: the same, debug builds only. Never use on input from users,
// the network or disk: those get a Status.
#pragma once

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace runloom::core_internal {
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond) {
    stream_ << file << ":" << line << ": RUNLOOM_CHECK failed: " << cond << " ";
  }
  [[noreturn]] ~CheckFailure() {
    std::cerr << stream_.str() << std::endl;
    std::abort();
  }
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};
struct Voidify {
  void operator&(std::ostream&) {}
};
}  // namespace runloom::core_internal

#define RUNLOOM_CHECK(cond)                      \
  (cond) ? (void)0                               \
         : ::runloom::core_internal::Voidify() & \
               ::runloom::core_internal::CheckFailure(__FILE__, __LINE__, #cond).stream()

#ifdef NDEBUG
#define RUNLOOM_DCHECK(cond) \
  while (false) RUNLOOM_CHECK(cond)
#else
#define RUNLOOM_DCHECK(cond) RUNLOOM_CHECK(cond)
#endif
