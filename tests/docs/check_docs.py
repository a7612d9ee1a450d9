#!/usr/bin/env python3
"""The operator's documentation says what the binary does.

Usage: check_docs.py RUNLOOM SOURCE_DIR CHECK

The binary (and, for exit codes, the CLI's source) is the source of truth;
README.md and docs/operations.md must agree with it. CHECK is one of:

  cli         every command of `runloom --help` (walked through every
              subcommand's --help) has a `### \\`runloom CMD\\`` heading under
              operations.md's "## Command reference", whose table lists
              exactly the command's flags with their defaults; and every
              `runloom CMD ... --flag` written anywhere in README.md or
              operations.md (code blocks and inline code) is a flag of CMD,
              and every inline `--flag` is a flag of some command.
  exit-codes  operations.md's "### Exit codes" table lists exactly the kExit*
              codes of src/cli/commands.h, and each is returned somewhere in
              src/cli.
  metrics     operations.md's "### Metrics" table lists exactly the metric
              families a running `serve` and `worker` export, each with the
              processes that export it.
  backends    the first paragraph of README.md and of operations.md names
              every backend the binary accepts (--db and --queue forms).

Each finding names the file and line, or the flag, code or metric, and what
to change. Exit 0 when all agree, 1 with the findings otherwise. Like
scripts/check_layering.py it reads text and drives the binary; nothing
here needs a library beyond Python's own.
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

DOCS = ("README.md", "docs/operations.md")


def read(src, rel):
    with open(os.path.join(src, rel), encoding="utf-8") as f:
        return f.read()


def section(text, heading):
    """The lines under `heading` (a whole line) up to the next heading of its level or above,
    with the line number of the heading."""
    lines = text.split("\n")
    level = len(heading) - len(heading.lstrip("#"))
    for i, line in enumerate(lines):
        if line == heading:
            out = []
            for j in range(i + 1, len(lines)):
                m = re.match(r"^(#+) ", lines[j])
                if m and len(m.group(1)) <= level:
                    break
                out.append((j + 1, lines[j]))
            return out
    return None


def table_rows(lines):
    """(line number, cells) of each body row of the markdown tables in `lines`."""
    rows = []
    for n, line in lines:
        if not line.startswith("|") or re.match(r"^\|[\s|:-]+\|$", line):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
        rows.append((n, cells))
    return rows


def unquote(cell):
    return cell.strip().strip("`")


# --- the CLI ---------------------------------------------------------------

def cli_help(runloom, path):
    r = subprocess.run([runloom] + path + ["--help"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        sys.exit(f"check_docs: `runloom {' '.join(path)} --help` exited {r.returncode}: {r.stderr}")
    return r.stdout


def parse_help(text):
    """{flag: default or ''}, [subcommands], {flag: description} of one CLI11 --help page."""
    flags, subs, descs, sec, cur = {}, [], {}, None, None
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            sec, cur = line[:-1], None
            continue
        if sec == "Options" and re.match(r"^  -", line):
            names = [n for n in line.split()[0].split(",") if n.startswith("--")]
            cur = None
            if not names or names[0] in ("--help", "--version"):
                continue
            m = re.match(r"^  \S+ [A-Z]+=(\S+)", line)
            cur = names[0]
            flags[cur] = m.group(1) if m else ""
            parts = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            descs[cur] = parts[1] if len(parts) > 1 else ""
        elif sec == "Options" and cur and re.match(r"^\s{20,}\S", line):
            descs[cur] = (descs[cur] + " " + line.strip()).strip()
        elif sec == "Subcommands" and re.match(r"^  \S", line):
            subs.append(line.split()[0])
    return flags, subs, descs


def cli_tree(runloom):
    """{"worker": {flag: default}, "token create": {...}, ...}; "" is the top level."""
    tree = {}

    def walk(path):
        flags, subs, _ = parse_help(cli_help(runloom, path))
        tree[" ".join(path)] = flags
        for s in subs:
            walk(path + [s])

    walk([])
    return tree


def code_texts(text):
    """(line number, text) of every code block line and every inline code span (a span may
    run over a line break)."""
    out, fenced, prose = [], False, []
    for n, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            prose.append("")
            continue
        if fenced or line.startswith("    "):
            out.append((n, line))
            prose.append("")
        else:
            prose.append(line)
    joined = "\n".join(prose)
    for m in re.finditer(r"(`+)(.+?)\1", joined, re.S):
        out.append((joined.count("\n", 0, m.start()) + 1, m.group(2).replace("\n", " ")))
    return sorted(out)


RUNLOOM_WORD = re.compile(r"^(?:\./)?(?:build/)?runloom$")
FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]*")


def flags_written(snippet, tree):
    """(command, flag) for each `runloom CMD ... --flag` in one line of code."""
    words = re.split(r"[\s\[\]()]+", snippet)
    found = []
    i = 0
    while i < len(words):
        if not RUNLOOM_WORD.match(words[i]):
            i += 1
            continue
        cmd, i = "", i + 1
        while i < len(words) and (f"{cmd} {words[i]}".strip()) in tree:
            cmd = f"{cmd} {words[i]}".strip()
            i += 1
        while i < len(words) and not RUNLOOM_WORD.match(words[i]):
            w = words[i]
            if w in ("|", "||", "&&", ";", "#", "&") or w.startswith("#"):
                break
            m = FLAG.match(w)
            if m:
                found.append((cmd, m.group(0)))
            i += 1
    return found


def check_cli(runloom, src):
    tree = cli_tree(runloom)
    all_flags = set().union(*tree.values()) | {"--help", "--version"}
    problems = []
    ops = read(src, "docs/operations.md")
    ref = section(ops, "## Command reference")
    if ref is None:
        return ["docs/operations.md: no \"## Command reference\" section; add one with a "
                "`### `runloom CMD`` heading and a flag table for each command"]
    # The reference: one heading per command, a table of exactly its flags.
    documented, cmd = {}, None
    for n, line in ref:
        m = re.match(r"^### `runloom ([a-z -]+)`$", line)
        if m:
            cmd = m.group(1)
            documented[cmd] = {"line": n, "flags": {}}
            continue
        if cmd is None or not line.startswith("| `--"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
        documented[cmd]["flags"][unquote(cells[0])] = (n, unquote(cells[1]) if len(cells) > 1 else "")
    for c, flags in tree.items():
        if not c:
            continue
        if c not in documented:
            problems.append(f"docs/operations.md: `runloom {c}` has no `### `runloom {c}`` heading "
                            "under \"## Command reference\"")
            continue
        doc = documented[c]["flags"]
        for f, default in flags.items():
            if f not in doc:
                problems.append(f"docs/operations.md:{documented[c]['line']}: `runloom {c}` takes "
                                f"{f} (default '{default}'), which its table does not list")
            elif doc[f][1] != default:
                problems.append(f"docs/operations.md:{doc[f][0]}: `runloom {c} {f}` defaults to "
                                f"'{default}', the table says '{doc[f][1]}'")
        for f, (n, _) in doc.items():
            if f not in flags:
                problems.append(f"docs/operations.md:{n}: `runloom {c}` has no flag {f}; "
                                "remove the row or fix the name")
    for c, d in documented.items():
        if c not in tree:
            problems.append(f"docs/operations.md:{d['line']}: there is no command `runloom {c}`")
    # Every other mention, in both documents.
    for rel in DOCS:
        for n, snippet in code_texts(read(src, rel)):
            for c, f in flags_written(snippet, tree):
                if f not in tree.get(c, {}) and f not in ("--help",) and not (c == "" and f == "--version"):
                    where = f"`runloom {c}`" if c else "`runloom`"
                    problems.append(f"{rel}:{n}: {where} has no flag {f} (in `{snippet.strip()}`)")
            words = snippet.split()
            if words and FLAG.match(words[0]) and not any(RUNLOOM_WORD.match(w) for w in words):
                f = FLAG.match(words[0]).group(0)
                if f not in all_flags:
                    problems.append(f"{rel}:{n}: `{snippet.strip()}` names {f}, which no runloom "
                                    "command takes")
    return problems


# --- exit codes --------------------------------------------------------------

def check_exit_codes(src):
    problems = []
    header = read(src, "src/cli/commands.h")
    codes = {name: int(v) for name, v in
             re.findall(r"inline constexpr int (kExit\w+)\s*=\s*(?://[^\n]*\n\s*)?(\d+);", header)}
    if not codes:
        return ["src/cli/commands.h: no `inline constexpr int kExit... = N;` found"]
    cli_dir = os.path.join(src, "src/cli")
    sources = ""
    for name in sorted(os.listdir(cli_dir)):
        if name.endswith((".cc", ".h")) and not name.endswith("_test.cc"):
            sources += read(src, os.path.join("src/cli", name))
    for name in codes:
        uses = len(re.findall(rf"\b{name}\b", sources))
        if uses < 2:  # its definition, and at least one use
            problems.append(f"src/cli/commands.h: {name} = {codes[name]} is defined but no command "
                            "returns it")
    rows = section(read(src, "docs/operations.md"), "### Exit codes")
    if rows is None:
        return problems + ["docs/operations.md: no \"### Exit codes\" section"]
    documented = {}
    for n, cells in table_rows(rows):
        if cells[0].isdigit():
            documented[int(cells[0])] = n
    for name, code in codes.items():
        if code not in documented:
            problems.append(f"docs/operations.md: exit code {code} ({name}, src/cli/commands.h) is "
                            "not in the \"### Exit codes\" table")
    for code, n in documented.items():
        if code not in codes.values():
            problems.append(f"docs/operations.md:{n}: exit code {code} is documented but the CLI "
                            "has no such code (src/cli/commands.h)")
    return problems


# --- metrics -----------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(url, deadline):
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.read().decode()
        except OSError as e:
            last = e
            time.sleep(0.1)
    raise RuntimeError(f"no answer from {url}: {last}")


def families(exposition):
    return {m.group(1): m.group(2) for m in re.finditer(r"^# TYPE (\S+) (\S+)$", exposition, re.M)}


def read_line(proc, pattern, deadline):
    """The first match of `pattern` in the process's stdout/stderr lines."""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(pattern, line)
        if m:
            return m
    raise RuntimeError(f"the process never printed /{pattern}/")


def stop(proc):
    """SIGTERM, then up to 30 s for the process to end. One that does not is
    killed, so no test leaves it behind, and the timeout still fails the check."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def exported(runloom, expected):
    """{process: {family: type}} of a running serve and worker, after each ran a workflow.
    `expected`: {process: families the docs say it exports}, waited for."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        flow = os.path.join(tmp, "flow.yaml")
        with open(flow, "w") as f:
            f.write("name: docs-metrics\nsteps:\n  - id: a\n    kind: noop\n")
        db = os.path.join(tmp, "docs.db")
        # A tenant with a limit: the budget gauges have a series per tenant
        # (with none, their families are empty and not exported).
        config = os.path.join(tmp, "config.yaml")
        with open(config, "w") as f:
            f.write("tenants:\n  docs: {budget: 1}\n")
        env = dict(os.environ, RUNLOOM_LOG_LEVEL="warning")
        env.pop("RUNLOOM_DB", None)
        env.pop("RUNLOOM_QUEUE", None)
        subprocess.run([runloom, "run", flow, "--db", db, "--detach"], env=env, check=True,
                       capture_output=True, timeout=60)
        deadline = time.monotonic() + 60
        worker = subprocess.Popen([runloom, "worker", "--db", db, "--config", config,
                                   "--metrics-listen", "127.0.0.1:0"],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            url = read_line(worker, r"metrics on (http://\S+/metrics)", deadline).group(1)
            # The worker listens before its backend opens and its engine
            # and LLM cap controller register their families (a slow build,
            # e.g. ASan under load, is scraped in between): scrape until
            # every family the table gives the worker is there, for at most
            # 20 s (a family really missing is then reported).
            found = families(scrape(url, deadline))
            settle = min(deadline, time.monotonic() + 20)
            while not expected.get("worker", set()) <= set(found) and time.monotonic() < settle:
                time.sleep(0.1)
                found = families(scrape(url, deadline))
            out["worker"] = found
        finally:
            stop(worker)
        port = free_port()
        serve = subprocess.Popen([runloom, "serve", "--db", db, "--config", config,
                                  "--listen", f"127.0.0.1:{port}", "--insecure-no-auth"], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            scrape(base + "/healthz", deadline)
            scrape(base + "/api/v1/runs", deadline)
            out["serve"] = families(scrape(base + "/metrics", deadline))
        finally:
            stop(serve)
    return out


def check_metrics(runloom, src):
    problems = []
    rows = section(read(src, "docs/operations.md"), "### Metrics")
    if rows is None:
        return ["docs/operations.md: no \"### Metrics\" section"]
    documented = {}
    for n, cells in table_rows(rows):
        if len(cells) == 5 and cells[0].startswith("`"):
            procs = {p.strip() for p in cells[3].split(",") if p.strip()}
            documented[unquote(cells[0])] = (n, unquote(cells[1]), procs)
    expected = {}
    for name, (_, _, procs) in documented.items():
        for proc in procs:
            expected.setdefault(proc, set()).add(name)
    got = exported(runloom, expected)
    for proc, fams in got.items():
        for name, kind in sorted(fams.items()):
            if name not in documented:
                problems.append(f"docs/operations.md: `runloom {proc}` exports {name} ({kind}), which "
                                "the \"### Metrics\" table does not list")
                continue
            n, dkind, procs = documented[name]
            if dkind != kind:
                problems.append(f"docs/operations.md:{n}: {name} is a {kind}, the table says {dkind}")
            if proc not in procs:
                problems.append(f"docs/operations.md:{n}: `runloom {proc}` exports {name}; add "
                                f"{proc} to its \"exported by\" cell")
    for name, (n, _, procs) in documented.items():
        for proc in sorted(procs):
            if proc not in got:
                problems.append(f"docs/operations.md:{n}: {name}: unknown process '{proc}' (serve "
                                "or worker)")
            elif name not in got[proc]:
                problems.append(f"docs/operations.md:{n}: the table says `runloom {proc}` exports "
                                f"{name}; it does not")
    return problems


# --- backends ----------------------------------------------------------------

BACKEND_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL", "postgresql": "PostgreSQL",
                 "redis": "Redis"}


def first_paragraph(text):
    paras = [p for p in re.split(r"\n\s*\n", text) if p.strip() and not p.startswith("#")]
    return paras[0] if paras else ""


def check_backends(runloom, src):
    _, _, descs = parse_help(cli_help(runloom, ["run"]))
    schemes = set(re.findall(r"\b([a-z]+):(?://|:)", descs.get("--db", "") + " " +
                             descs.get("--queue", "")))
    problems = []
    if not schemes:
        return ["`runloom run --help`: --db and --queue name no URL scheme"]
    for scheme in sorted(schemes):
        name = BACKEND_NAMES.get(scheme)
        if name is None:
            problems.append(f"`runloom run --help` accepts {scheme}:// URLs; add its product name to "
                            "BACKEND_NAMES in tests/docs/check_docs.py and to the docs' first paragraphs")
            continue
        for rel in DOCS:
            if name not in first_paragraph(read(src, rel)):
                problems.append(f"{rel}: the first paragraph does not name {name}, which --db/--queue "
                                f"accept ({scheme}://)")
    return sorted(set(problems))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    runloom, src, check = sys.argv[1:]
    if check == "cli":
        problems = check_cli(runloom, src)
    elif check == "exit-codes":
        problems = check_exit_codes(src)
    elif check == "metrics":
        problems = check_metrics(runloom, src)
    elif check == "backends":
        problems = check_backends(runloom, src)
    else:
        sys.exit(f"check_docs: unknown check '{check}' (cli, exit-codes, metrics, backends)")
    for p in problems:
        print(p)
    if problems:
        print(f"check_docs {check}: {len(problems)} finding(s); the binary is the source of truth")
        return 1
    print(f"check_docs {check}: the docs agree with the binary")
    return 0


if __name__ == "__main__":
    sys.exit(main())
