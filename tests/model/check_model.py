#!/usr/bin/env python3
"""Checks the Promela model of the run protocol (tests/model/run_protocol.pml).

  check_model.py MODEL GOLDEN WORKDIR            the model check (safety, then each LTL claim)
  check_model.py MODEL GOLDEN WORKDIR --mutants  every MUTANT_ in the model must fail it
  check_model.py MODEL GOLDEN WORKDIR --drift    a golden table the model does not match must fail it

The model check is, in order:
  1. the model's status writes (its store_write call sites, with the model
     preprocessed as spin sees it) are exactly the rows of the golden table:
     from, to, party, and whether the row needs the lease token;
  2. transitions.pml, generated from the golden table, holds row_allowed()
     and needs_token(), which the model asserts at every write;
  3. spin's exhaustive safety search (assertions, invalid end states) finds
     no error, and no store_write line is reported unreached;
  4. each LTL claim holds under weak fairness (acceptance cycles, -a -f), in
     the configurations CONFIGS names for it.

Exit status 0 when the check (or, with --mutants / --drift, every expected
failure) holds; 1 otherwise, with what differed on stderr. Written in Python,
like scripts/check_layering.py: it drives spin and gcc and reads text.
"""

import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

STATUSES = ["queued", "running", "paused", "waiting", "completed", "rejected", "unresolved",
            "budget_stopped", "failed", "cancelled"]
PARTIES = ["admission", "executor", "sweeper", "decision", "cancel", "rerun", "admin", "timer",
           "signal"]

# The configurations searched (bounds of the model, as spin -D), each with
# the LTL claims checked in it. The default reaches every row (safety and
# `leased`); "two gates" is smaller elsewhere so that a decision can be stale
# (read at one gate, sent at the next) within seconds. `rests` is checked with
# the fault and without the rerun, and with the rerun and without the fault:
# in the default configuration (both) its search takes about 5 min on this
# machine (1.0e8 states visited), too close to any bound a shared machine
# keeps; RUNLOOM_MODEL_FULL=1 checks every claim in every configuration.
# A timer (issue 23) has configurations of its own: with it in the default
# one too, that search doubled (2.5e7 states, past 100 s). Signals (the
# mailbox, waits for a signal with a timeout or none) have three more, with no
# sleep and no gate (MAX_SIGNALS=0 elsewhere): one signal and one wait with
# the fault, then with the rerun, and two of each (a signal kept for the next
# wait). A sleep beside the waits, or a signaller that may stop early, tripled
# these searches. Every store_write line must be reached by some configuration.
CONFIGS = [
    ("default", ["MAX_TIMERS=0", "MAX_SIGNALS=0"], ["leased"]),
    ("fault, no rerun", ["MAX_RERUNS=0", "MAX_TIMERS=0", "MAX_SIGNALS=0"], ["rests"]),
    ("rerun, no fault", ["MAX_FAULTS=0", "MAX_TIMERS=0", "MAX_SIGNALS=0"], ["rests"]),
    ("timer, fault", ["MAX_RERUNS=0", "MAX_PAUSES=0", "MAX_SIGNALS=0"], ["rests", "leased"]),
    ("timer, rerun", ["MAX_FAULTS=0", "MAX_PAUSES=0", "MAX_SIGNALS=0"], ["rests"]),
    ("signal, fault", ["MAX_RERUNS=0", "MAX_PAUSES=0", "MAX_TIMERS=0"], ["rests", "leased"]),
    ("signal, rerun", ["MAX_FAULTS=0", "MAX_PAUSES=0", "MAX_TIMERS=0"], ["rests"]),
    ("two signals", ["MAX_SIGNALS=2", "MAX_RERUNS=0", "MAX_FAULTS=0", "MAX_PAUSES=0",
                     "MAX_TIMERS=0"], []),
    ("two gates", ["MAX_PAUSES=2", "MAX_RERUNS=0", "MAX_FAULTS=0", "MAX_TIMERS=0",
                   "MAX_SIGNALS=0"], []),
]

# Where each mutant is expected to be caught: its configuration (and claim,
# None = the safety search) is searched first, so that a mutant costs one
# search and not every configuration before it (the mutants' test: 403 s in
# configuration order, beside the model check; 118 s this way, alone). Only an order: a mutant
# caught elsewhere is caught all the same, and one missing here is searched
# in CONFIGS order.
MUTANT_CAUGHT_IN = {
    "MUTANT_DECISION_NO_DIGEST": ("two gates", None),
    "MUTANT_LEASE_PAUSED": ("two gates", None),
    "MUTANT_LEASE_WAITING": ("two signals", None),
    "MUTANT_NO_RECONCILER": ("signal, fault", "leased"),
    "MUTANT_NO_TOKEN_CHECK": ("signal, fault", None),
    "MUTANT_PARK_IGNORES_MAILBOX": ("two signals", None),
    "MUTANT_RENEW_AFTER_EXPIRY": ("signal, fault", None),
    "MUTANT_RERUN_KEEPS_CANCEL": ("signal, rerun", None),
    "MUTANT_SIGNAL_NOT_WAITING": ("two signals", None),
    "MUTANT_SIGNAL_WAKES_TWICE": ("two signals", None),
    "MUTANT_SWEEPER_IGNORES_LEASE": ("two gates", None),
}

# Each search is bounded: a model that grows past this is reported, not left running.
SEARCH_TIMEOUT_S = 300


def fail(msg):
    print(f"check_model: {msg}", file=sys.stderr)
    return 1


def parse_golden(path):
    """The golden table's rows as (from, to, party, needs_token) in model names."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            cols = line.split()
            if len(cols) == 4 and cols[3] == "-":
                frm, to, party, tok = cols[0], cols[1], cols[2], False
            elif len(cols) == 5 and cols[3:] == ["must", "match"]:
                frm, to, party, tok = cols[0], cols[1], cols[2], True
            else:
                raise ValueError(f"{path}:{n}: expected 'from to party lease-token', got '{line}'")
            for name, known in ((frm, STATUSES + ["-"]), (to, STATUSES), (party, PARTIES)):
                if name not in known:
                    raise ValueError(f"{path}:{n}: unknown name '{name}'")
            rows.append(("NONE" if frm == "-" else frm.upper(), to.upper(), party.upper(), tok))
    return rows


def generate_table(rows, out_path):
    """transitions.pml: the golden table as the model's row_allowed() and needs_token()."""
    allowed = " || \\\n   ".join(f"(f == {a} && t == {b} && p == {c})" for a, b, c, _ in rows)
    fenced = " || \\\n   ".join(f"(f == {a} && t == {b} && p == {c})"
                                for a, b, c, tok in rows if tok) or "false"
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("/* Generated by tests/model/check_model.py from tests/golden/transitions.txt. */\n")
        f.write(f"#define row_allowed(f, t, p) assert( \\\n   {allowed})\n")
        f.write(f"#define needs_token(f, t, p) ( \\\n   {fenced})\n")


def preprocess(model, workdir, defines):
    """The model as spin sees it (its own cpp), so #ifdef MUTANT_ lines drop out."""
    args = ["gcc", "-E", "-P", "-fdirectives-only", "-x", "c", f"-I{workdir}"] + [f"-D{d}" for d in defines] + [model]
    text = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


WRITE_SITE = re.compile(r"\bstore_write\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)")


def model_rows(text):
    """The (from, to, party) of every store_write call site; the inline's own parameters excluded."""
    return {(a, b, c) for a, b, c, _ in WRITE_SITE.findall(text) if a != "from"}


def fenced_sites(text):
    """(from, to, party) -> whether its call sites pass a lease token (not 0)."""
    out = {}
    for a, b, c, cred in WRITE_SITE.findall(text):
        if a == "from":
            continue
        out.setdefault((a, b, c), set()).add(cred != "0")
    return out


def static_check(model, rows, workdir):
    """Step 1: the model writes exactly the golden rows. Returns a list of differences."""
    text = preprocess(model, workdir, [])
    golden = {(a, b, c) for a, b, c, _ in rows}
    sites = model_rows(text)
    problems = []
    for r in sorted(golden - sites):
        problems.append(f"the golden table has {r[0]} -> {r[1]} by {r[2]}, the model never writes it")
    for r in sorted(sites - golden):
        problems.append(f"the model writes {r[0]} -> {r[1]} by {r[2]}, the golden table has no such row")
    creds = fenced_sites(text)
    for a, b, c, tok in rows:
        site = creds.get((a, b, c))
        if site is None or c != "EXECUTOR":
            continue
        # A fenced executor row passes the writer's token; an unfenced one (the lease) passes 0.
        if tok and False in site:
            problems.append(f"{a} -> {b} by {c} needs the lease token, a model site passes none")
        if not tok and True in site:
            problems.append(f"{a} -> {b} by {c} needs no lease token, but the model passes one")
    return problems


def model_jobs():
    """How many configurations (or, with --mutants, mutants) are searched side
    by side: RUNLOOM_MODEL_JOBS, default 2. Each search is one process (spin's
    pan, up to about 1.1 GB); the test command's model check took 318-380 s
    one at a time on a 2-core machine, beside the rest of the Release tests."""
    try:
        return max(1, int(os.environ.get("RUNLOOM_MODEL_JOBS", "2")))
    except ValueError:
        return 1


def full_check():
    """RUNLOOM_MODEL_FULL=1: every claim in every configuration (see CONFIGS)."""
    return os.environ.get("RUNLOOM_MODEL_FULL") == "1"


def run(cmd, cwd):
    # RUNLOOM_MODEL_FULL's default-configuration `rests` alone takes about 5 min.
    timeout = SEARCH_TIMEOUT_S * (4 if full_check() else 1)
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


# gcc takes ~10 s of CPU to compile pan.c at -O2 and ~2.5 s at -O0 (0.4 MB of
# C). An -O0 safety pan searches ~1.6x slower, so a safety search below a few
# million states is faster at -O0 (compile + search); an -O0 liveness pan
# (nested search, weak fairness) is ~5x slower, so every liveness pan keeps
# -O2. Listed here: the safety searches that keep -O2 (the default
# configuration's, 7.7e6 states). The level changes how fast pan runs, never
# what it explores: the same states stored, the same errors.
PAN_O2_SAFETY = {"default"}


def build(model, workdir, defines, liveness, optimize=True):
    """spin -a, then gcc: pan for safety (-DSAFETY) or for acceptance cycles."""
    rc, out = run(["spin", "-a"] + [f"-D{d}" for d in defines] + [os.path.basename(model)], workdir)
    if rc != 0:
        raise RuntimeError(f"spin -a failed:\n{out}")
    # -DCOLLAPSE stores each state compressed: a third less memory for about
    # 40 % more time (`rests` in "signal, fault": 42 s and 0.3 GB with it,
    # 30 s and 0.45 GB without; the default configuration's `leased`, the
    # largest search of the test command: 1.1 GB plain). Only the full check
    # (RUNLOOM_MODEL_FULL=1; 1e8 states in one search) needs it. MEMLIM (MB)
    # raises pan's default 2 GB bound; past it pan stops with an error, which
    # fails the check.
    full = full_check()
    flags = ["-O2" if optimize else "-O0", f"-DMEMLIM={16384 if full else 4096}",
             "-DVECTORSZ=2048", "-w"] + (["-DCOLLAPSE"] if full else [])
    flags += ["-DNFAIR=4"] if liveness else ["-DSAFETY", "-DNOCLAIM"]
    exe = "pan_live" if liveness else "pan_safe"
    rc, out = run(["gcc"] + flags + ["-o", exe, "pan.c"], workdir)
    if rc != 0:
        raise RuntimeError(f"gcc pan.c failed:\n{out}")
    return os.path.join(workdir, exe)


def errors_of(out):
    m = re.search(r"errors: (\d+)", out)
    return int(m.group(1)) if m else None


def figures_of(out):
    states = re.search(r"([\d.e+]+) states, stored", out)
    depth = re.search(r"depth reached (\d+)", out)
    return (states.group(1) if states else "?", depth.group(1) if depth else "?")


def trail(workdir, model, defines):
    """The counterexample spin saved, as the steps of the processes (shortened)."""
    rc, out = run(["spin", "-t", "-p", "-g"] + [f"-D{d}" for d in defines] +
                  [os.path.basename(model)], workdir)
    lines = [l for l in out.splitlines() if "proc" in l or "assertion" in l.lower()]
    return "\n".join(lines[-40:])


def claims_of(model_text):
    return re.findall(r"^\s*ltl\s+(\w+)\s*\{", model_text, re.M)


def search(local_model, workdir, defines, config, report, claims, unreached_all,
           first_claim=None, name=None):
    """Steps 3-4 for one configuration: safety, then `claims`. Returns (ok, why).

    `unreached_all`: the store_write lines no configuration searched so far
    reached (None: not counted); this one's unreached lines are intersected in."""
    t0 = time.monotonic()
    # A mutant's (defines) safety search is at -O0 everywhere: it stops at its
    # first error.
    pan = build(local_model, workdir, defines + config, liveness=False,
                optimize=not defines and name in PAN_O2_SAFETY)
    rc, out = run([pan, "-m100000"], workdir)
    errs = errors_of(out)
    states, depth = figures_of(out)
    if errs != 0:
        why = trail(workdir, local_model, defines + config) if errs else out[-2000:]
        return False, f"safety: {errs} error(s)\n{why}"
    if unreached_all is not None:
        # spin's "unreached in proctype" report names each line this search never executed.
        not_here = {int(m.group(1)) for m in
                    re.finditer(r"run_protocol\.pml:(\d+), state \d+, \"([^\"]*)\"", out)}
        unreached_all &= not_here
    report.append(f"safety: 0 errors, {states} states, depth {depth}, "
                  f"{time.monotonic() - t0:.1f} s")
    if full_check():
        claims = claims_of(open(local_model, encoding="utf-8").read())
    if first_claim in claims:
        claims = [first_claim] + [c for c in claims if c != first_claim]
    if not claims:
        return True, ""
    pan = build(local_model, workdir, defines + config, liveness=True)
    for claim in claims:
        t0 = time.monotonic()
        rc, out = run([pan, "-a", "-f", "-m100000", "-N", claim], workdir)
        errs = errors_of(out)
        states, depth = figures_of(out)
        if errs != 0:
            why = trail(workdir, local_model, defines + config) if errs else out[-2000:]
            return False, f"liveness '{claim}' (weak fairness): {errs} error(s)\n{why}"
        report.append(f"liveness '{claim}' under weak fairness: 0 errors, {states} states, "
                      f"{time.monotonic() - t0:.1f} s")
    return True, ""


def model_check(model, golden, workdir, defines=()):
    """Steps 1-4 in workdir. Returns (ok, report)."""
    defines = list(defines)
    rows = parse_golden(golden)
    os.makedirs(workdir, exist_ok=True)
    shutil.copy(model, workdir)
    generate_table(rows, os.path.join(workdir, "transitions.pml"))
    local_model = os.path.join(workdir, os.path.basename(model))
    report = []
    problems = static_check(local_model, rows, workdir)
    if problems:
        return False, "the model and the golden table differ:\n  " + "\n  ".join(problems)
    report.append(f"the model writes the {len(rows)} rows of the golden table, no other")
    model_claims = claims_of(open(local_model, encoding="utf-8").read())
    checked = {c for _, _, claims in CONFIGS for c in claims}
    if set(model_claims) != checked:
        return False, (f"the model's claims {sorted(model_claims)} are not the ones CONFIGS "
                       f"checks {sorted(checked)}")
    src = open(local_model, encoding="utf-8").read().splitlines()
    # Every store_write call site (not the inline's own definition), until a
    # configuration reaches it; with mutants (defines) not counted.
    unreached = None if defines else {
        n for n, text in enumerate(src, 1) if re.search(r"\bstore_write\(\s*[A-Z]", text)}
    hint = next((MUTANT_CAUGHT_IN[d] for d in defines if d in MUTANT_CAUGHT_IN), (None, None))
    jobs = 1 if defines else model_jobs()
    if jobs == 1:
        # The small configurations first: a mutant they catch is caught in seconds.
        order = list(reversed(CONFIGS))
        order.sort(key=lambda c: c[0] != hint[0])  # stable: the hinted configuration first
    else:
        # Side by side, the longest first (CONFIGS is about largest first), so
        # that the last to start are the short ones.
        order = list(CONFIGS)

    def one(item):
        """One configuration in a folder of its own (spin and gcc write there)."""
        name, config, claims = item
        sub = os.path.join(workdir, re.sub(r"[^a-z0-9]+", "_", name))
        os.makedirs(sub, exist_ok=True)
        shutil.copy(local_model, sub)
        shutil.copy(os.path.join(workdir, "transitions.pml"), sub)
        lines = [f"configuration '{name}' ({' '.join(config) or 'the model defaults'}):"]
        mine = None if unreached is None else set(unreached)
        ok, why = search(os.path.join(sub, os.path.basename(local_model)), sub, defines, config,
                         lines, claims, mine, hint[1] if name == hint[0] else None, name)
        return ok, why, lines, mine

    # One worker runs them in `order`; either way the first failure cancels
    # the configurations not yet started.
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(one, item): item[0] for item in order}
        for f in concurrent.futures.as_completed(futures):
            results[futures[f]] = f.result()
            if not results[futures[f]][0]:
                pool.shutdown(wait=True, cancel_futures=True)
                break
    for name, _, _ in order:  # reported in a fixed order, whatever finished first
        if name not in results:
            continue
        ok, why, lines, mine = results[name]
        report.extend(lines)
        if not ok:
            return False, f"configuration '{name}': {why}"
        if unreached is not None:
            unreached &= mine
    if unreached:
        return False, "store_write sites no configuration reached:\n  " + "\n  ".join(
            f"line {n}: {src[n - 1].strip()}" for n in sorted(unreached))
    return True, "\n".join(report)


def mutants_of(model):
    return sorted(set(re.findall(r"\b(MUTANT_\w+)", open(model, encoding="utf-8").read())))


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    model, golden, workdir = argv[1], argv[2], argv[3]
    mode = argv[4] if len(argv) == 5 else ""
    for tool in ("spin", "gcc"):
        if shutil.which(tool) is None:
            return fail(f"{tool} not found; install it with `bash scripts/bootstrap.sh test` "
                        "(Debian package spin, gcc)")
    if mode == "":
        ok, report = model_check(model, golden, os.path.join(workdir, "model"))
        print(report)
        return 0 if ok else fail("the model check failed")
    if mode == "--mutants":
        bad = 0
        mutants = mutants_of(model)
        for m in mutants:
            if m not in MUTANT_CAUGHT_IN:
                print(f"{m}: not in MUTANT_CAUGHT_IN; searched in configuration order",
                      file=sys.stderr)
        # Each mutant in a folder of its own, model_jobs() of them side by side.
        with concurrent.futures.ThreadPoolExecutor(max_workers=model_jobs()) as pool:
            checked = pool.map(lambda m: model_check(model, golden,
                                                     os.path.join(workdir, m.lower()), [m]),
                               mutants)
            for m, (ok, report) in zip(mutants, checked):
                first = report.splitlines()[0] if report else ""
                if ok:
                    bad += 1
                    print(f"{m}: NOT caught\n{report}", file=sys.stderr)
                else:
                    print(f"{m}: caught: {first}")
        return fail(f"{bad} mutant(s) not caught") if bad else 0
    if mode == "--drift":
        rows = open(golden, encoding="utf-8").read().splitlines()
        data = [i for i, l in enumerate(rows) if l.strip() and not l.startswith("#")]
        variants = {
            "a row dropped": [l for i, l in enumerate(rows) if i != data[-1]],
            "a row added": rows + ["paused            completed       executor    must match"],
            "a token column changed": [l.replace("must match", "-") if i == data[5] else l
                                       for i, l in enumerate(rows)],
        }
        bad = 0
        for name, text in variants.items():
            with tempfile.TemporaryDirectory(dir=workdir if os.path.isdir(workdir) else None) as d:
                g = os.path.join(d, "transitions.txt")
                with open(g, "w", encoding="utf-8") as f:
                    f.write("\n".join(text) + "\n")
                wd = os.path.join(d, "work")
                os.makedirs(wd)
                shutil.copy(model, wd)
                generate_table(parse_golden(g), os.path.join(wd, "transitions.pml"))
                problems = static_check(os.path.join(wd, os.path.basename(model)),
                                        parse_golden(g), wd)
            if problems:
                print(f"golden table with {name}: refused: {problems[0]}")
            else:
                bad += 1
                print(f"golden table with {name}: NOT refused", file=sys.stderr)
        return fail(f"{bad} drifted table(s) accepted") if bad else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
