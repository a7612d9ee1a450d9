// Fibers (fiber.h): stacks, the switch, the hand-over of a woken fiber, the
// sanitizers' annotations and the timer thread.
//
// The hand-over: a fiber that suspends is still running on its stack until
// the switch back to its thread completes, so a wake that comes first must
// not queue it yet. Its state says where it is: kRunning (on a thread),
// kSuspended (switched out), kWoken (a wake came while kRunning). Wake moves
// kSuspended -> queued, or kRunning -> kWoken; Resume, once the fiber has
// switched out, moves kRunning -> kSuspended, or finds kWoken and queues the
// fiber itself. Either way each wake queues the fiber once.
//
// The switch: on x86-64, a few lines of assembly below (runloom_fiber_switch); on other
// machines, swapcontext. glibc's swapcontext makes an rt_sigprocmask system
// call on every switch, to save and restore a signal mask fibers never change:
// measured 11 per 3-step run (strace -c over `runloom bench`), each costly on a
// virtual machine. Boost.Context switches without one, but the embedded
// engine's link closure has no Boost by contract (src/engine/CMakeLists.txt,
// cmake/LinkClosure.cmake), so the switch is written here: it saves what the
// System V ABI asks a callee to keep (rbx, rbp, r12-r15, the SSE control and
// status word and the x87 control word) on the stack it leaves, stores the
// stack pointer, loads the other and restores the same from it.
#include "core/fiber.h"

#include "core/check.h"
#include "runloom/clock.h"
#include "runloom/mutex.h"

#include "absl/base/thread_annotations.h"

#include <atomic>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <queue>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

#if defined(__x86_64__) && defined(__linux__)
#define RUNLOOM_FIBER_FAST_SWITCH 1
#else
#include <ucontext.h>
#endif
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define RUNLOOM_FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define RUNLOOM_FIBER_TSAN 1
#endif

#if RUNLOOM_FIBER_FAST_SWITCH
// runloom_fiber_switch(void** save, void* load): pushes the callee-saved
// registers and the two control words, stores the stack pointer in *save,
// switches to `load` (a stack pointer stored the same way, or a new fiber's
// first frame, below) and pops the same from it; its `ret` returns where that
// stack left off. runloom_fiber_start: where a new fiber's first frame
// returns to; calls rbx(r12) (RunFiber(fiber)) on a 16-byte-aligned stack and
// never returns (RunFiber ends by switching out for good).
asm(R"(
  .text
  .p2align 4
  .globl runloom_fiber_switch
  .hidden runloom_fiber_switch
  .type runloom_fiber_switch, @function
runloom_fiber_switch:
  .cfi_startproc
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw 12(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr 8(%rsp)
  fldcw 12(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .cfi_endproc
  .size runloom_fiber_switch, .-runloom_fiber_switch

  .p2align 4
  .globl runloom_fiber_start
  .hidden runloom_fiber_start
  .type runloom_fiber_start, @function
runloom_fiber_start:
  .cfi_startproc
  .cfi_undefined rip
  movq %r12, %rdi
  callq *%rbx
  ud2
  .cfi_endproc
  .size runloom_fiber_start, .-runloom_fiber_start
)");
extern "C" void runloom_fiber_switch(void** save, void* load);
extern "C" void runloom_fiber_start();
#endif

namespace runloom::fiber {

struct WaitState {
  std::atomic<bool> fired{false};
  Fiber* fiber = nullptr;  // null: a thread waits on `done`
  runloom::Notification done;
};

class Fiber {
 public:
  enum State : int { kRunning, kSuspended, kWoken };

#if RUNLOOM_FIBER_FAST_SWITCH
  void* sp = nullptr;         // the fiber's stack pointer, while switched out
  void* thread_sp = nullptr;  // the resuming thread's, while the fiber runs
#else
  ucontext_t context;
  ucontext_t* thread_context = nullptr;  // the resuming thread's, while running
#endif
  std::function<void()> fn;
  Host* host = nullptr;
  char* stack = nullptr;  // the mapping, guard page first
  std::atomic<int> state{kRunning};
  bool done = false;
  int suspendable = 0;  // open SuspendableRegions (only the fiber touches it)
#if RUNLOOM_FIBER_ASAN
  void* fake_stack = nullptr;
  const void* thread_stack_bottom = nullptr;
  size_t thread_stack_size = 0;
#endif
#if RUNLOOM_FIBER_TSAN
  void* tsan_fiber = nullptr;
  void* tsan_thread = nullptr;
#endif
};

namespace {

// The fiber the calling thread runs. Read through CurrentFiber(), never
// cached across a Suspend (the fiber may resume on another thread).
thread_local Fiber* t_current = nullptr;

[[gnu::noinline]] Fiber* CurrentFiber() {
  Fiber* f = t_current;
  asm volatile("" ::: "memory");  // no reuse of an earlier thread's value
  return f;
}

[[gnu::noinline]] void SetCurrentFiber(Fiber* f) { t_current = f; }

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// Freed stacks, kept for the next fibers: a stack's touched pages stay
// committed, so reuse costs no page faults. Bounded: beyond it they go back.
constexpr size_t kPooledStacks = 256;

runloom::Mutex& StackPoolMutex() {
  static auto* mu = new runloom::Mutex();
  return *mu;
}
std::vector<char*>& StackPool() {
  static auto* pool = new std::vector<char*>();
  return *pool;
}

size_t MappingBytes() { return kStackBytes + PageSize(); }

char* TakeStack() {
  {
    runloom::MutexLock l(&StackPoolMutex());
    if (!StackPool().empty()) {
      char* s = StackPool().back();
      StackPool().pop_back();
      return s;
    }
  }
  void* p = mmap(nullptr, MappingBytes(), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "runloom: fatal: cannot map a fiber stack of %zu bytes (errno %d)\n",
                 MappingBytes(), errno);
    std::abort();
  }
  // The guard page: a stack overflow faults instead of writing below.
  RUNLOOM_CHECK(mprotect(p, PageSize(), PROT_NONE) == 0);
  return static_cast<char*>(p);
}

void GiveStack(char* s) {
  {
    runloom::MutexLock l(&StackPoolMutex());
    if (StackPool().size() < kPooledStacks) {
      StackPool().push_back(s);
      return;
    }
  }
  munmap(s, MappingBytes());
}

// Switches from the thread to `f` (Resume) ...
void SwitchIn(Fiber* f) {
#if RUNLOOM_FIBER_TSAN
  f->tsan_thread = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(f->tsan_fiber, 0);
#endif
#if RUNLOOM_FIBER_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f->stack + PageSize(), kStackBytes);
#endif
#if RUNLOOM_FIBER_FAST_SWITCH
  runloom_fiber_switch(&f->thread_sp, f->sp);
#else
  ucontext_t here;  // this frame lasts while the fiber runs
  f->thread_context = &here;
  RUNLOOM_CHECK(swapcontext(f->thread_context, &f->context) == 0);
  f->thread_context = nullptr;
#endif
#if RUNLOOM_FIBER_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

// ... and from `f` back to the thread that resumed it (Suspend, the end).
void SwitchOut(Fiber* f) {
#if RUNLOOM_FIBER_TSAN
  __tsan_switch_to_fiber(f->tsan_thread, 0);
#endif
#if RUNLOOM_FIBER_ASAN
  // A fiber that ended will not come back: ASan frees its fake stack.
  __sanitizer_start_switch_fiber(f->done ? nullptr : &f->fake_stack, f->thread_stack_bottom,
                                 f->thread_stack_size);
#endif
#if RUNLOOM_FIBER_FAST_SWITCH
  runloom_fiber_switch(&f->sp, f->thread_sp);
#else
  RUNLOOM_CHECK(swapcontext(&f->context, f->thread_context) == 0);
#endif
#if RUNLOOM_FIBER_ASAN
  __sanitizer_finish_switch_fiber(f->fake_stack, &f->thread_stack_bottom, &f->thread_stack_size);
#endif
}

void RunFiber(Fiber* f) {
#if RUNLOOM_FIBER_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &f->thread_stack_bottom, &f->thread_stack_size);
#endif
  try {
    f->fn();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runloom: fatal: exception escaped a fiber: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "runloom: fatal: exception escaped a fiber\n");
    std::abort();
  }
  f->fn = nullptr;
  f->done = true;
  SwitchOut(f);
  std::abort();  // an ended fiber is never resumed
}

#if !RUNLOOM_FIBER_FAST_SWITCH
// makecontext passes ints: the fiber's address in two halves.
void Entry(unsigned int hi, unsigned int lo) {
  RunFiber(reinterpret_cast<Fiber*>((static_cast<uintptr_t>(hi) << 32) | lo));
}
#endif

// The timer thread of WakeAt: a heap of (when, waker) on RealClock().
class Timers {
 public:
  static Timers& Get() {
    static Timers* timers = new Timers();  // never destroyed: usable during exit
    return *timers;
  }
  void Add(absl::Time when, Waker w) ABSL_LOCKS_EXCLUDED(mu_) {
    runloom::MutexLock l(&mu_);
    const bool earliest = heap_.empty() || when < heap_.top().when;
    heap_.push({when, seq_++, std::move(w)});
    if (!started_) {
      started_ = true;
      std::thread([this] { Loop(); }).detach();
    }
    if (earliest) ++generation_;
  }

 private:
  struct Entry {
    absl::Time when;
    uint64_t seq;
    Waker waker;
    bool operator>(const Entry& o) const {
      return when != o.when ? when > o.when : seq > o.seq;
    }
  };
  void Loop() ABSL_LOCKS_EXCLUDED(mu_) {
    Clock* clock = RealClock();
    std::vector<Waker> due;
    while (true) {
      {
        runloom::MutexLock l(&mu_);
        const uint64_t seen = generation_;
        auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return generation_ != seen;
        };
        const absl::Time next = heap_.empty() ? absl::InfiniteFuture() : heap_.top().when;
        if (next > clock->Now()) clock->AwaitWithDeadline(&mu_, absl::Condition(&changed), next);
        const absl::Time now = clock->Now();
        while (!heap_.empty() && heap_.top().when <= now) {
          due.push_back(heap_.top().waker);
          heap_.pop();
        }
      }
      for (const Waker& w : due) w.Wake();  // outside mu_: Ready takes the host's lock
      due.clear();
    }
  }

  runloom::Mutex mu_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_ ABSL_GUARDED_BY(mu_);
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped when the earliest changes
  bool started_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

Fiber* Create(std::function<void()> fn, Host* host) {
  auto* f = new Fiber();
  f->fn = std::move(fn);
  f->host = host;
  f->stack = TakeStack();
#if RUNLOOM_FIBER_ASAN
  // A pooled stack's last fiber left from frames that never returned: their
  // redzones are still poisoned, and would be reported as this one's.
  __asan_unpoison_memory_region(f->stack + PageSize(), kStackBytes);
#endif
#if RUNLOOM_FIBER_FAST_SWITCH
  // The first frame, as runloom_fiber_switch leaves one: the control words,
  // r15..r12, rbx, rbp, then the address its `ret` goes to. r12 = the fiber,
  // rbx = what runloom_fiber_start calls; `ret` leaves the stack pointer
  // 16-byte aligned for that call, as the ABI wants.
  auto* top = reinterpret_cast<uint64_t*>(f->stack + PageSize() + kStackBytes);  // 16-aligned
  uint64_t* frame = top - 3 - 8;  // frame[8] (the return address) at top - 24
  uint32_t mxcsr = 0;
  uint16_t fpu_cw = 0;
  asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(fpu_cw));
  frame[0] = 0;
  frame[1] = static_cast<uint64_t>(mxcsr) | (static_cast<uint64_t>(fpu_cw) << 32);
  frame[2] = 0;                                      // r15
  frame[3] = 0;                                      // r14
  frame[4] = 0;                                      // r13
  frame[5] = reinterpret_cast<uint64_t>(f);          // r12
  frame[6] = reinterpret_cast<uint64_t>(&RunFiber);  // rbx
  frame[7] = 0;                                      // rbp
  frame[8] = reinterpret_cast<uint64_t>(&runloom_fiber_start);
  f->sp = frame;
#else
  RUNLOOM_CHECK(getcontext(&f->context) == 0);
  f->context.uc_stack.ss_sp = f->stack + PageSize();
  f->context.uc_stack.ss_size = kStackBytes;
  f->context.uc_link = nullptr;
  const auto addr = reinterpret_cast<uintptr_t>(f);
  makecontext(&f->context, reinterpret_cast<void (*)()>(&Entry), 2,
              static_cast<unsigned int>(addr >> 32), static_cast<unsigned int>(addr & 0xffffffffu));
#endif
#if RUNLOOM_FIBER_TSAN
  f->tsan_fiber = __tsan_create_fiber(0);
#endif
  return f;
}

bool Resume(Fiber* f) {
  RUNLOOM_CHECK(CurrentFiber() == nullptr);  // fibers do not resume fibers
  f->state.store(Fiber::kRunning, std::memory_order_relaxed);
  SetCurrentFiber(f);
  SwitchIn(f);
  SetCurrentFiber(nullptr);
  if (f->done) return true;
  // Switched out by Suspend: now a wake may queue it; one that came while it
  // was still running left kWoken, and it is queued here instead.
  int expected = Fiber::kRunning;
  if (!f->state.compare_exchange_strong(expected, Fiber::kSuspended, std::memory_order_acq_rel)) {
    f->host->Ready(f);
  }
  return false;
}

void Destroy(Fiber* f) {
  RUNLOOM_CHECK(f->done);
#if RUNLOOM_FIBER_TSAN
  __tsan_destroy_fiber(f->tsan_fiber);
#endif
  GiveStack(f->stack);
  delete f;
}

bool OnFiber() { return CurrentFiber() != nullptr; }

bool Waker::Wake() const {
  if (state_ == nullptr || state_->fired.exchange(true, std::memory_order_acq_rel)) return false;
  Fiber* f = state_->fiber;
  if (f == nullptr) {
    state_->done.Notify();
    return true;
  }
  if (f->state.exchange(Fiber::kWoken, std::memory_order_acq_rel) == Fiber::kSuspended) {
    f->host->Ready(f);
  }
  return true;
}

bool Waker::ended() const {
  return state_ == nullptr || state_->fired.load(std::memory_order_acquire);
}

void Suspend(absl::FunctionRef<void(const Waker&)> arm) {
  Fiber* self = CurrentFiber();
  auto state = std::make_shared<WaitState>();
  state->fiber = self;
  arm(Waker(state));
  if (self == nullptr) {
    state->done.WaitForNotification();
    return;
  }
  // Woken at once (by arm): no need to switch out.
  if (state->fired.load(std::memory_order_acquire) &&
      self->state.load(std::memory_order_acquire) == Fiber::kWoken) {
    self->state.store(Fiber::kRunning, std::memory_order_relaxed);
    return;
  }
  SwitchOut(self);
}

void WakeAt(absl::Time when, Waker w) { Timers::Get().Add(when, std::move(w)); }

SuspendableRegion::SuspendableRegion() : fiber_(CurrentFiber()) {
  if (fiber_ != nullptr) ++fiber_->suspendable;
}

SuspendableRegion::~SuspendableRegion() {
  if (fiber_ != nullptr) --fiber_->suspendable;
}

bool InSuspendableRegion() {
  Fiber* f = CurrentFiber();
  return f != nullptr && f->suspendable > 0;
}

void SleepUntil(absl::Time until) {
  if (!OnFiber()) {
    RealClock()->SleepUntil(until);
    return;
  }
  if (until <= RealClock()->Now()) return;
  Suspend([&](const Waker& w) { WakeAt(until, w); });
}

}  // namespace runloom::fiber
