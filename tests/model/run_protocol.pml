/*
 * The run protocol of runloom, as a Promela model checked by spin
 * (tests/model/check_model.py runs it; docs/reliability.md says what it
 * proves and what it leaves to the simulator and the kill campaign).
 *
 * One run, the store that holds its row, the transport that carries its
 * queue messages, and every party that writes the row: admission, two
 * executors, the sweeper and its reconciler, two racing deciders, cancel,
 * rerun, the admin reset, the timer sweep and a signaller (one signal name;
 * the run's mailbox and its waits for it); faults: executor crashes, lease expiry at any
 * moment (a slow or paused holder), queue messages lost or duplicated,
 * executors giving runs back at shutdown.
 *
 * Every status write goes through store_write(FROM, TO, PARTY, CRED) with
 * literal arguments. check_model.py reads those call sites and requires
 * them to be exactly the rows of tests/golden/transitions.txt, and it
 * generates row_allowed() (transitions.pml) from that same file, so the
 * table, the code (src/core/transitions.cc, compared by transitions_test)
 * and this model cannot drift apart. spin's "unreached" report must not
 * name a store_write line: every row is exercised.
 *
 * Each `atomic` block is one store transaction (the row is locked; SQLite's
 * single writer, PostgreSQL's FOR UPDATE). Between them, any other party may
 * act. A party's local variables are what it read earlier: possibly stale.
 *
 * Mutations (spin -D<name>), each shown to fail the check:
 *   MUTANT_SWEEPER_IGNORES_LEASE  the sweeper takes a live lease for expired
 *   MUTANT_NO_TOKEN_CHECK         the store accepts an executor write with any token
 *   MUTANT_DECISION_NO_DIGEST     a decision is accepted without its gate's digest
 *   MUTANT_RENEW_AFTER_EXPIRY     a lease is renewed after it expired
 *   MUTANT_LEASE_PAUSED           the store leases a paused run
 *   MUTANT_LEASE_WAITING          the store leases a waiting run (a timer not yet due)
 *   MUTANT_PARK_IGNORES_MAILBOX   the store parks a run waiting for a signal its mailbox holds
 *   MUTANT_SIGNAL_WAKES_TWICE     a signal's wake does not mark it consumed: the executor consumes it again
 *   MUTANT_SIGNAL_NOT_WAITING     a signal is consumed by the run's wait when the run no longer waits (timed out)
 *   MUTANT_NO_RECONCILER          a queued run whose message was lost is never enqueued again
 *   MUTANT_RERUN_KEEPS_CANCEL     a rerun keeps the cancel request of the execution before it
 */

#include "transitions.pml"

/* Statuses (include/runloom/status.h); NONE: the row does not exist yet. */
#define NONE 0
#define QUEUED 1
#define RUNNING 2
#define PAUSED 3
#define COMPLETED 4
#define REJECTED 5
#define UNRESOLVED 6
#define BUDGET_STOPPED 7
#define FAILED 8
#define CANCELLED 9
#define WAITING 10
#define terminal(s) (s >= COMPLETED && s <= CANCELLED)

/* Parties (include/runloom/run.h). */
#define ADMISSION 1
#define EXECUTOR 2
#define SWEEPER 3
#define DECISION 4
#define CANCEL 5
#define RERUN 6
#define ADMIN 7
#define TIMER 8
#define SIGNAL 9

/* How a wait for a signal was resolved (ghost). */
#define RES_SIGNAL 1   /* by a signal it consumed */
#define RES_TIMEOUT 2  /* by its timeout (the timer) */
#define RES_LEFT 3     /* by the run leaving it: cancel, admin reset, rerun */

/* Bounds that keep the state space finite. */
#ifndef MAX_ATTEMPTS
#define MAX_ATTEMPTS 1 /* the run's attempt cap */
#endif
#ifndef MAX_STEPS
#define MAX_STEPS 1    /* step records one execution commits before it ends */
#endif
#ifndef MAX_RENEWS
#define MAX_RENEWS 1   /* renewals within one execution (its work is finite) */
#endif
#ifndef MAX_PAUSES
#define MAX_PAUSES 1   /* approval gates the run reaches in all */
#endif
#ifndef MAX_RERUNS
#define MAX_RERUNS 1
#endif
#ifndef MAX_TIMERS
#define MAX_TIMERS 1   /* timers (sleeps) the run waits at in all */
#endif
#ifndef MAX_SIGNALS
#define MAX_SIGNALS 1  /* signals sent to the run in all, and waits for one it reaches in all
                          (each with a timeout, or none) */
#endif
/* Faults in all: crashes, lost and duplicated messages, give-backs (one budget, so
   their every combination up to it is explored, not the product of each one's). */
#ifndef MAX_FAULTS
#define MAX_FAULTS 1
#endif
#ifndef QCAP
#define QCAP 2
#endif

/* The run's row. */
byte status = NONE;
byte token = 0;          /* the current lease token; 0: none */
bool live = false;       /* the lease has not expired */
bool held = false;       /* ghost: an executor is executing under the current lease */
byte attempts = 0;
bool cancel_req = false;
byte gate = 0;           /* the current gate (its proposal digest); counts pauses */
byte rev = 0;            /* the revision; a rerun starts the next */

/* The run's waits for a signal and its mailbox (one signal name). A wait is
   named by its key (the engine's "<revision>:<step path>"): 1, 2, ... */
byte wait_sig = 0;       /* status waiting: the wait for a signal it rests at; 0: a sleep */
bool wake = false;       /* status waiting: the wait has a wake time (the timer can fire) */
byte pending = 0;        /* the wait the run parked at, its step not yet recorded resolved */
byte timed_out = 0;      /* the wait the timer resolved, its step not yet recorded */
byte sigwaits = 0;       /* the highest wait key recorded */
byte sent = 0;           /* signals kept in the mailbox: 1..sent, in order */
byte mbox = 0;           /* of them, not consumed */
byte by[MAX_SIGNALS + 1];  /* signal i: the wait that consumed it; 0: in the mailbox */

/* The transport: one message per enqueue; its payload is unused. */
chan q = [QCAP] of { bit };

/* Ghosts: what the properties read, never the protocol. */
byte issued = 0;         /* the highest lease token ever issued */
bool decided = false;    /* a decision was accepted for the current gate */
byte cancel_rev = 255;   /* the revision a cancel was requested in */
byte how[MAX_SIGNALS + 1];  /* wait k: how it was resolved (RES_); 0: not yet */
bool used[MAX_SIGNALS + 1]; /* signal i resolved a wait (consumed by it) */

/* Fault and episode budgets. */
byte faults = 0;
byte reruns = 0;
byte timers = 0;
byte signals = 0;

/* What the store checks (a mutation weakens one). */
#ifdef MUTANT_NO_TOKEN_CHECK
#define TOKEN_OK(t) true
#else
#define TOKEN_OK(t) (t == token)
#endif
#ifdef MUTANT_DECISION_NO_DIGEST
#define DIGEST_OK(g) true
#else
#define DIGEST_OK(g) (g == gate)
#endif
#ifdef MUTANT_SWEEPER_IGNORES_LEASE
#define SEEN_EXPIRED true
#else
#define SEEN_EXPIRED (!live)
#endif
#ifdef MUTANT_RENEW_AFTER_EXPIRY
#define RENEWABLE true
#else
#define RENEWABLE live
#endif
#if defined(MUTANT_LEASE_PAUSED)
#define LEASABLE (status == QUEUED || status == PAUSED || (status == RUNNING && !live))
#elif defined(MUTANT_LEASE_WAITING)
#define LEASABLE (status == QUEUED || status == WAITING || (status == RUNNING && !live))
#else
#define LEASABLE (status == QUEUED || (status == RUNNING && !live))
#endif
#ifdef MUTANT_PARK_IGNORES_MAILBOX
#define PARK_REFUSED false
#else
#define PARK_REFUSED (mbox > 0) /* kAlreadyExists: a signal of that name is in the mailbox */
#endif

/* Claim 1: a wait is resolved at most once, by one of RES_. */
inline resolve(k, r) {
  assert(how[k] == 0);
  how[k] = r
}

/* Claim 2: signal i is consumed by one wait, once (the ghost `used`, not the
   store's mark, so a mark not written is still caught); it resolves wait k. */
inline use_signal(i, k) {
  assert(i >= 1 && i <= sent && !used[i]);
  used[i] = true;
  resolve(k, RES_SIGNAL)
}

/* The store's mark: signal i consumed by wait k. */
inline mark_consumed(i, k) {
  by[i] = k;
  mbox--
}

/* i: the earliest signal of the mailbox not consumed; 0: none. */
inline first_unconsumed(i) {
  i = 1;
  do
  :: i <= sent && by[i] != 0 -> i++
  :: else -> break
  od;
  if
  :: i > sent -> i = 0
  :: else -> skip
  fi
}

/* i: the signal wait k consumed; 0: none. */
inline consumed_by(k, i) {
  i = 1;
  do
  :: i <= sent && by[i] != k -> i++
  :: else -> break
  od;
  if
  :: i > sent -> i = 0
  :: else -> skip
  fi
}

/*
 * Claim 3: no lost signal: the run never rests waiting for a signal while
 * one is in its mailbox (the refused park and the signal's wake see to it).
 * Claim 4: a parked run holds no lease.
 */
inline waiting_ok() {
  assert(!(status == WAITING && wait_sig != 0 && mbox > 0));
  assert(status != WAITING || (token == 0 && !live))
}

/* A send: the transport may lose the message or deliver it twice (faults). */
inline enqueue() {
  if
  :: nfull(q) -> q!1
  :: full(q) -> skip /* a message is already waiting */
  :: faults < MAX_FAULTS -> faults++ /* lost */
  :: faults < MAX_FAULTS && len(q) + 2 <= QCAP -> faults++; q!1; q!1 /* duplicated */
  fi
}

/*
 * One accepted status write: the properties every write must keep, then the
 * write. `cred` is the writer's lease token (executor) or the gate it read
 * (decision).
 */
inline store_write(from, to, party, cred) {
  assert(status == from);
  /* Only rows of the golden table (transitions.pml, generated from it). */
  row_allowed(from, to, party);
  /* A stale token never writes: a fenced executor write carries the newest lease's token. */
  if
  :: needs_token(from, to, party) -> assert(cred == issued && cred == token);
  :: else -> skip
  fi
  /* Nobody but the holder and the admin reset moves a run whose lease is live. */
  assert(!(from == RUNNING && live && party != EXECUTOR && party != ADMIN));
  /* Terminal statuses are left only by a rerun. */
  assert(!terminal(from) || party == RERUN);
  /* One decision per gate, never one with a stale digest. */
  if
  :: party == DECISION -> assert(!decided && cred == gate); decided = true
  :: else -> skip
  fi
  /* The executor writes cancelled only for a cancel requested in this revision. */
  if
  :: party == EXECUTOR && to == CANCELLED -> assert(cancel_rev == rev)
  :: else -> skip
  fi
  /* A wait for a signal left: by its signal (consumed first: use_signal), its
     timeout, or the run leaving it. Any move from waiting clears the wait. */
  if
  :: from == WAITING && wait_sig != 0 && party == SIGNAL -> assert(how[wait_sig] == RES_SIGNAL)
  :: from == WAITING && wait_sig != 0 && party == TIMER -> resolve(wait_sig, RES_TIMEOUT)
  :: from == WAITING && wait_sig != 0 && party != SIGNAL && party != TIMER -> resolve(wait_sig, RES_LEFT)
  :: else -> skip
  fi;
  if
  :: from == WAITING -> wait_sig = 0; wake = false
  :: else -> skip
  fi;
  status = to;
  if
  :: to == PAUSED -> gate++; decided = false
  :: else -> skip
  fi
  /* Terminal statuses and moves to queued or paused release the lease. */
  if
  :: to != RUNNING -> live = false; token = 0
  :: else -> skip
  fi
  /* A move to queued enqueues a message in the same transaction. */
  if
  :: to == QUEUED -> enqueue()
  :: else -> skip
  fi;
  waiting_ok()
}

/*
 * An accepted executor write that keeps the status (a step record, an
 * event). Each token is issued to one executor, so "every accepted write
 * carries the newest token" is "at most one executor's writes are accepted at
 * a time, and never again once a newer lease exists".
 */
inline step_write(tok) {
  assert(tok == issued && tok == token)
}

proctype Executor(byte me) {
  byte mytok;
  byte steps;
  byte renews;
  bool done;
  byte wk;   /* the wait for a signal it read no signal for, and parks at; 0: none */
  byte sq;   /* a signal of the mailbox (a temporary) */
end_idle:
  do
  :: q?_ ->
     /* AcquireLease: a queued run, or a running one whose lease expired. */
     atomic {
       if
       :: LEASABLE ->
          if
          :: status == QUEUED -> store_write(QUEUED, RUNNING, EXECUTOR, 0)
          :: status == RUNNING -> store_write(RUNNING, RUNNING, EXECUTOR, 0)
#ifdef MUTANT_LEASE_PAUSED
          :: status == PAUSED -> store_write(PAUSED, RUNNING, EXECUTOR, 0)
#endif
#ifdef MUTANT_LEASE_WAITING
          :: status == WAITING -> store_write(WAITING, RUNNING, EXECUTOR, 0)
#endif
          fi;
          issued++;
          token = issued;
          mytok = token;
          live = true;
          held = true;
          attempts++
       :: else -> mytok = 0 /* refused: the message is acknowledged */
       fi
     }
     if
     :: mytok == 0 -> skip
     :: else ->
        steps = 0;
        renews = 0;
        done = false;
        /* The executor-side attempt cap: a lease past it fails the run before any step. */
        atomic {
          if
          :: attempts > MAX_ATTEMPTS ->
             if
             :: status == RUNNING && TOKEN_OK(mytok) -> store_write(RUNNING, FAILED, EXECUTOR, mytok)
             :: else -> skip
             fi;
             done = true
          :: else -> skip
          fi
        }
        do
        :: done -> break
        :: !done && steps < MAX_STEPS ->
           /* A step record, fenced by the token. */
           atomic {
             if
             :: status == RUNNING && TOKEN_OK(mytok) -> step_write(mytok); steps++
             :: else -> done = true /* lease lost: stop */
             fi
           }
        :: !done && renews < MAX_RENEWS ->
           /* The lease keeper renews; a refused renewal stops the execution. */
           renews++;
           atomic {
             if
             :: status == RUNNING && TOKEN_OK(mytok) && RENEWABLE -> live = true
             :: else -> done = true
             fi
           }
        :: !done && wk == 0 && (pending != 0 || sigwaits < MAX_SIGNALS) ->
           /*
            * A wait for the signal: the one it parked at (resumed), else the next
            * one. It reads (SignalConsumedBy, the timeout, NextSignal) and writes
            * what it read in one step: while it holds the lease only it consumes, so
            * a read signal stays there, and a write after a lost lease is refused
            * (as a read after it). A read finding no signal parks in a second step:
            * a signal may come in between.
            */
           atomic {
             if
             :: status == RUNNING && TOKEN_OK(mytok) ->
                if
                :: pending != 0 -> wk = pending
                :: else -> wk = sigwaits + 1
                fi;
                consumed_by(wk, sq);
                if
                :: sq != 0 ->
                   /* Resumed after the signal's wake: the step succeeds with it. */
                   step_write(mytok);
                   assert(how[wk] == RES_SIGNAL && timed_out != wk);
                   pending = 0;
                   wk = 0
                :: sq == 0 && timed_out == wk ->
                   /* Resumed after the timeout: the step fails as one (the run goes on). */
                   step_write(mytok);
                   assert(how[wk] == RES_TIMEOUT);
                   timed_out = 0;
                   pending = 0;
                   wk = 0
                :: else ->
                   first_unconsumed(sq);
                   if
                   :: sq != 0 ->
                      /* Consumes it in the fenced write that records the step succeeded. */
                      step_write(mytok);
                      use_signal(sq, wk);
                      mark_consumed(sq, wk);
                      sigwaits = wk;
                      pending = 0;
                      wk = 0
                   :: else -> skip /* none: it parks (wk) */
                   fi
                fi
             :: else -> done = true /* lease lost: stop */
             fi;
             sq = 0
           }
        :: !done && wk != 0 ->
           /* Parks at wait wk, with a timeout or none; refused, writing nothing, if
              a signal came since its read. */
           atomic {
             if
             :: status == RUNNING && TOKEN_OK(mytok) && PARK_REFUSED ->
                skip /* kAlreadyExists: it reads again */
             :: status == RUNNING && TOKEN_OK(mytok) && !PARK_REFUSED ->
                sigwaits = wk;
                pending = wk;
                wait_sig = wk;
                if
                :: wake = true
                :: skip
                fi;
                store_write(RUNNING, WAITING, EXECUTOR, mytok);
                done = true
             :: else -> done = true /* lease lost: stop */
             fi;
             wk = 0
           }
        :: !done && wk == 0 && pending == 0 ->
           /* The graph ends, pauses at a gate, or sees the cancel request. */
           atomic {
             if
             :: status == RUNNING && TOKEN_OK(mytok) ->
                if
                :: store_write(RUNNING, COMPLETED, EXECUTOR, mytok)
                :: store_write(RUNNING, REJECTED, EXECUTOR, mytok)
                :: store_write(RUNNING, UNRESOLVED, EXECUTOR, mytok)
                :: store_write(RUNNING, BUDGET_STOPPED, EXECUTOR, mytok)
                :: store_write(RUNNING, FAILED, EXECUTOR, mytok)
                :: gate < MAX_PAUSES -> store_write(RUNNING, PAUSED, EXECUTOR, mytok)
                :: timers < MAX_TIMERS -> timers++; wake = true; store_write(RUNNING, WAITING, EXECUTOR, mytok)
                :: cancel_req -> store_write(RUNNING, CANCELLED, EXECUTOR, mytok)
                :: faults < MAX_FAULTS ->
                   /* Worker shutdown gives the run back. */
                   faults++;
                   store_write(RUNNING, QUEUED, EXECUTOR, mytok)
                fi
             :: else -> skip
             fi;
             done = true
           }
        :: !done && faults < MAX_FAULTS ->
           /* A crash: the process state vanishes; the lease is left to expire. */
           faults++;
           done = true
        od;
        /* Forget the execution (keeps idle states canonical). */
        atomic {
          if
          :: mytok == token -> held = false
          :: else -> skip
          fi
        };
        mytok = 0;
        steps = 0;
        renews = 0;
        done = false;
        wk = 0
     fi
  od
}

/*
 * Lease expiry is time passing, not a write. The lease of a holder that is
 * gone expires freely; that of one still executing (slow, paused, its clock
 * behind) expires as a fault.
 *
 * Restart recovery (issue 27: the sweeper's EndDeadHoldersLeases and
 * Store::ExpireLease) is the first transition taken at once rather than at
 * the TTL: a lease ends early only when its holder is provably gone (!held).
 * It writes no status (the run stays RUNNING until the sweeper's recovery
 * below), so no row of transitions.txt is new. Ending a live holder's lease
 * early, as a wrong liveness check would, is the second transition: the
 * protocol holds under it because the new token fences the old holder; the
 * simulator checks that the check itself never errs that way (FaultStore's
 * ExpireLease and the injected bug leases_ended_unchecked).
 */
proctype Clock() {
end_clock:
  do
  :: atomic { live && !held -> live = false }
  :: atomic { live && held && faults < MAX_FAULTS -> faults++; live = false }
  od
}

/*
 * The sweeper (one tick's two halves, as in src/engine/service/sweeper.cc):
 * a running run whose lease expired is enqueued again, or failed
 * at the attempt cap by a write fenced with the expired token. What it read
 * may be stale by the time it writes.
 */
proctype Sweeper() {
  byte ctok;
  byte catt;
end_sweep:
  do
  :: atomic { status == RUNNING && SEEN_EXPIRED -> ctok = token; catt = attempts };
     if
     :: catt >= MAX_ATTEMPTS ->
        atomic {
          if
          :: status == RUNNING && token == ctok -> store_write(RUNNING, FAILED, SWEEPER, ctok)
          :: else -> skip /* the run moved on */
          fi;
          ctok = 0;
          catt = 0
        }
     :: else ->
        atomic {
          if
          :: status == QUEUED || status == RUNNING -> enqueue() /* never a paused or finished run */
          :: else -> skip
          fi;
          ctok = 0;
          catt = 0
        }
     fi
#ifndef MUTANT_NO_RECONCILER
  /* Its reconciler: a queued run with no message in the transport gets one. */
  :: atomic { status == QUEUED && empty(q) -> enqueue() }
#endif
  od
}

/* A person deciding: reads the gate (its digest), decides later. Two race. */
proctype Decider() {
  byte g;
end_decide:
  do
  :: atomic { status == PAUSED -> g = gate };
     atomic {
       if
       :: status == PAUSED && DIGEST_OK(g) ->
          store_write(PAUSED, QUEUED, DECISION, g);
          attempts = 0 /* a decision starts a fresh attempt budget */
       :: else -> skip /* 409: the gate moved on or was decided */
       fi;
       g = 0
     }
  od
}

/*
 * The timer sweep: a waiting run whose wake time the store's clock passed
 * goes back to the queue with a fresh attempt budget (the wait was not a
 * failed attempt). Time is not modelled: any moment may be the due one. A
 * wait for a signal with no timeout has no wake time.
 */
proctype Timer() {
end_timer:
  do
  :: atomic {
       status == WAITING && wake ->
       timed_out = wait_sig; /* a wait for a signal times out; 0: a sleep ends */
       store_write(WAITING, QUEUED, TIMER, 0);
       attempts = 0
     }
  od
}

/*
 * A signal sent to the run (SendSignal, one transaction): refused by a
 * finished run; else kept in the mailbox and, when the run rests waiting
 * for a signal, consumed by that wait, which it resolves: the run is queued
 * with a fresh attempt budget. (It sends at any moment, up to MAX_SIGNALS;
 * under weak fairness it sends them all. Stopping early, `:: break`, tripled
 * the search: a run that rests waiting for a signal is reached anyway, by a
 * signal refused before a rerun.)
 */
proctype Signaller() {
end_signal:
  do
  :: atomic {
       signals < MAX_SIGNALS ->
       signals++;
       if
       :: terminal(status) -> skip /* kFailedPrecondition: nothing kept */
       :: else ->
          sent++;
          mbox++;
          if
          :: status == WAITING && wait_sig != 0 ->
             use_signal(sent, wait_sig);
#ifndef MUTANT_SIGNAL_WAKES_TWICE
             mark_consumed(sent, wait_sig);
#endif
             store_write(WAITING, QUEUED, SIGNAL, 0);
             attempts = 0
#ifdef MUTANT_SIGNAL_NOT_WAITING
          :: status != WAITING && pending != 0 ->
             use_signal(sent, pending);
             mark_consumed(sent, pending)
#endif
          :: else -> skip /* kept for the run's next wait */
          fi
       fi;
       waiting_ok()
     }
  od
}

/* Cancel: queued, paused and waiting at once; running only requested. */
proctype Canceller() {
  if
  :: true /* nobody cancels in this history (fairness must not force one) */
  :: atomic {
       if
       :: status == QUEUED -> store_write(QUEUED, CANCELLED, CANCEL, 0)
       :: status == PAUSED -> store_write(PAUSED, CANCELLED, CANCEL, 0)
       :: status == WAITING -> store_write(WAITING, CANCELLED, CANCEL, 0)
       :: status == RUNNING -> cancel_req = true; cancel_rev = rev
       fi
     }
  fi
}

/* Rerun from a phase: a paused, waiting or finished (not cancelled) run, as a new revision. */
proctype Rerunner() {
end_rerun:
  do
  :: atomic {
       reruns < MAX_RERUNS &&
       (status == PAUSED || status == WAITING || (terminal(status) && status != CANCELLED)) ->
       if
       :: status == PAUSED -> store_write(PAUSED, QUEUED, RERUN, 0)
       :: status == WAITING -> store_write(WAITING, QUEUED, RERUN, 0)
       :: status == COMPLETED -> store_write(COMPLETED, QUEUED, RERUN, 0)
       :: status == REJECTED -> store_write(REJECTED, QUEUED, RERUN, 0)
       :: status == UNRESOLVED -> store_write(UNRESOLVED, QUEUED, RERUN, 0)
       :: status == FAILED -> store_write(FAILED, QUEUED, RERUN, 0)
       :: status == BUDGET_STOPPED -> store_write(BUDGET_STOPPED, QUEUED, RERUN, 0)
       fi;
       reruns++;
       rev++;
       attempts = 0;
       pending = 0; /* the new revision's waits are new ones */
       timed_out = 0;
#ifndef MUTANT_RERUN_KEEPS_CANCEL
       cancel_req = false
#else
       skip
#endif
     }
  od
}

/* The admin reset cancels the unfinished run, whoever holds it. */
proctype Admin() {
  if
  :: true /* no reset in this history */
  :: atomic {
       if
       :: status == QUEUED -> store_write(QUEUED, CANCELLED, ADMIN, 0)
       :: status == RUNNING -> store_write(RUNNING, CANCELLED, ADMIN, 0)
       :: status == PAUSED -> store_write(PAUSED, CANCELLED, ADMIN, 0)
       :: status == WAITING -> store_write(WAITING, CANCELLED, ADMIN, 0)
       fi
     }
  fi
}

init {
  atomic {
    store_write(NONE, QUEUED, ADMISSION, 0);
    run Executor(1);
    run Executor(2);
    run Clock();
    run Sweeper();
    run Decider();
    run Decider();
    run Canceller();
    run Rerunner();
    run Admin();
    run Timer();
#if MAX_SIGNALS > 0
    run Signaller()
#endif
  }
}

/* Liveness, under weak fairness once the bounded faults are spent. */
/* A queued run is eventually leased or finished. */
ltl leased { [] (status == QUEUED -> <> (status == RUNNING || terminal(status))) }
/* Every run comes to rest: finished, waiting at a gate, or waiting for a signal with no
   timeout (a timer is not rest: it fires). */
ltl rests { <> [] (status == PAUSED || terminal(status) || (status == WAITING && !wake)) }
