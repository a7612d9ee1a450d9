"""Tests of runloom_client against a real `runloom serve`.

    python3 clients/python/tests/test_client.py RUNLOOM_BINARY [WORK_DIR]

(or RUNLOOM_BINARY in the environment). Imports runloom_client as installed
(`pip install ./clients/python`), else from clients/python/src. Starts its
own server on a fresh SQLite file with an admin, an approver and a viewer
token, registers small workflows over the API, and checks every call of the
client, the typed errors, the size limits and timeouts, and that a followed
event stream cut mid-run -- by a proxy that drops connections mid-message,
and by a graceful restart of `serve` on the same database and port -- goes
on with every seq exactly once, in order.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
try:
    import runloom_client  # noqa: F401  (installed)
except ImportError:
    sys.path.insert(0, str(HERE.parent / "src"))
import runloom_client
from runloom_client import ApiError, Client, ResponseTooLarge, StreamMessage, TransportError

BINARY = ""
WORK = Path()
DB = Path()

# ------------------------------------------------------------------ helpers


class Server:
    """`runloom serve` on DB; port 0 picks one (read from its log line)."""

    def __init__(self, port: int = 0):
        self.proc = subprocess.Popen(
            [BINARY, "serve", "--db", str(DB), "--listen", f"127.0.0.1:{port}", "--executors", "2"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log: list[str] = []
        found = threading.Event()
        self.port = 0

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m and not found.is_set():
                    self.port = int(m.group(1))
                    found.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not found.wait(15):
            self.proc.kill()
            raise RuntimeError("serve did not log its address:\n" + "".join(self.log))
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            self.reader.join(5)  # EOF once serve has exited
            if self.proc.stderr is not None and not self.reader.is_alive():
                self.proc.stderr.close()


def token(name: str, role: str) -> str:
    out = subprocess.run(
        [BINARY, "token", "create", "--name", name, "--role", role, "--db", str(DB), "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return str(json.loads(out)["token"])


def wait_for(what: str, fn: Callable[[], Any], seconds: float = 15) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class CuttingProxy:
    """A TCP proxy to the server that cuts the n-th connection after
    `cut_after[n % len]` bytes from the server (mid-message, mid-line), and
    passes connections whole once `cuts` connections were cut."""

    def __init__(self, target_port: int, cut_after: list[int], cuts: int, stall: bool = False):
        self.stall = stall  # instead of closing at the cut, go silent and keep the connection open
        self.target_port = target_port
        self.cut_after = cut_after
        self.cuts_left = cuts
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            limit = self.cut_after[self.connections % len(self.cut_after)] if self.cuts_left > 0 else None
            self.cuts_left -= 1
            threading.Thread(target=self._serve, args=(client, limit), daemon=True).start()

    def _serve(self, client: socket.socket, limit: int | None) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.target_port))

        def pump_up() -> None:
            try:
                while data := client.recv(65536):
                    upstream.sendall(data)
            except OSError:
                pass

        threading.Thread(target=pump_up, daemon=True).start()
        sent = 0
        try:
            while data := upstream.recv(65536):
                if limit is not None and sent + len(data) >= limit:
                    client.sendall(data[: limit - sent])  # a part of a message, then the cut
                    if self.stall:
                        client.recv(1)  # silent until the client gives up on it and closes
                    break
                client.sendall(data)
                sent += len(data)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self.sock.close()


# The workflows both clients' tests register (cl_steps, cl_gate, cl_wait,
# cl_tick, cl_stream, cl_tenant), shared with clients/ts/test/client.test.mjs.
WORKFLOWS = HERE.parents[2] / "tests" / "clients" / "workflows"

server: Server
admin: Client
approver: Client
viewer: Client
SECRETS: list[str] = []


def setUpModule() -> None:
    global server, admin, approver, viewer
    SECRETS.extend([token("root", "admin"), token("alice", "approver"), token("vera", "viewer")])
    # tenant acme's budget (50 price units) in the ledger, as a config file gives it
    config = WORK / "config.yaml"
    config.write_text("tenants:\n  acme: {budget: 50}\n")
    subprocess.run([BINARY, "budgets", "--db", str(DB), "--config", str(config)], check=True, capture_output=True)
    server = Server()
    admin = Client(server.url, SECRETS[0], timeout=10)
    approver = Client(server.url, SECRETS[1], timeout=10)
    viewer = Client(server.url, SECRETS[2], timeout=10)
    for f in sorted(WORKFLOWS.glob("*.yaml")):
        admin.register_workflow(f.read_text())


def tearDownModule() -> None:
    code = server.stop()
    assert code == 0, f"serve exited {code}"


def seqs(msgs: list[StreamMessage]) -> list[int]:
    return [m.seq for m in msgs if m.seq is not None]


# -------------------------------------------------------------------- tests


class ClientTest(unittest.TestCase):
    def test_health_and_me(self) -> None:
        self.assertEqual(viewer.healthz().get("status"), "ok")
        self.assertEqual(viewer.readyz().get("status"), "ready")
        self.assertEqual(viewer.me(), {"name": "vera", "role": "viewer"})

    def test_token_never_shown(self) -> None:
        bad = Client(server.url, "rl_not_a_real_token_" + "x" * 20, timeout=5)
        with self.assertRaises(ApiError) as cm:
            bad.me()
        e = cm.exception
        self.assertEqual((e.status, e.code), (401, "unauthenticated"))
        for text in (str(e), repr(e), repr(bad), repr(admin), repr(approver)):
            self.assertNotIn("rl_not_a_real_token_", text)
            for s in SECRETS:
                self.assertNotIn(s, text)
        # a refused role carries the server's code
        with self.assertRaises(ApiError) as cm:
            viewer.start_run("cl_tick")
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "forbidden"))
        self.assertNotIn(SECRETS[2], str(cm.exception))

    def test_start_idempotent_get_list(self) -> None:
        first = admin.start_run("cl_tick", {}, idempotency_key="py-once")
        again = admin.start_run("cl_tick", {}, idempotency_key="py-once")
        self.assertEqual(first["id"], again["id"])
        self.assertEqual(first["idempotency_key"], "py-once")
        other = admin.start_run("cl_tick", idempotency_key="py-twice")
        self.assertNotEqual(other["id"], first["id"])
        done = wait_for("the run to complete", lambda: viewer.get_run(first["id"])["status"] == "completed")
        self.assertTrue(done)
        run = viewer.get_run(first["id"])
        self.assertEqual(run["step_counts"]["succeeded"], 1)
        page = viewer.list_runs(workflow="cl_tick", limit=1)
        self.assertEqual(len(page.runs), 1)
        self.assertNotEqual(page.next_cursor, "")
        ids = [r["id"] for r in viewer.iter_runs(workflow="cl_tick", page_size=1)]
        self.assertIn(first["id"], ids)
        self.assertIn(other["id"], ids)
        self.assertEqual(len(ids), len(set(ids)))
        self.assertEqual(viewer.steps(first["id"])[0]["step_id"], "tick")
        self.assertEqual(viewer.writes(first["id"]), [])
        evs = viewer.events(first["id"])
        self.assertEqual([e["seq"] for e in evs], list(range(1, len(evs) + 1)))
        self.assertEqual(viewer.events(first["id"], after=1, limit=1)[0]["seq"], 2)

    def test_search_runs(self) -> None:
        a = admin.start_run("cl_tenant", {"team": "acme", "order": "py-o-1"})
        time.sleep(0.01)  # b is created later than a: the time filters tell them apart
        b = admin.start_run("cl_tenant", {"team": "beta", "order": "py-o-2"}, idempotency_key="py-search-b")

        def ids(**filters: Any) -> list[str]:
            return [r["id"] for r in viewer.list_runs(workflow="cl_tenant", **filters).runs]

        self.assertEqual(ids(), [b["id"], a["id"]])
        self.assertEqual(ids(tenant="acme"), [a["id"]])
        self.assertEqual(ids(tenant="nobody"), [])
        self.assertEqual(ids(input_id="py-o-1"), [a["id"]])  # a top-level input's value
        self.assertEqual(ids(input_id="py-search-b"), [b["id"]])  # the idempotency key
        self.assertEqual(ids(created_after=b["created_at"]), [b["id"]])  # inclusive
        self.assertEqual(ids(created_before=b["created_at"]), [a["id"]])  # exclusive
        at_b = datetime.fromisoformat(b["created_at"])  # a datetime goes as RFC 3339 UTC
        self.assertEqual(ids(created_after=at_b, created_before=at_b.replace(year=at_b.year + 1)), [b["id"]])
        self.assertEqual([r["id"] for r in viewer.iter_runs(tenant="beta", page_size=1)], [b["id"]])
        with self.assertRaises(TypeError):  # a misspelt filter is no silent "every run"
            viewer.list_runs(tennant="acme")  # type: ignore[call-arg]
        with self.assertRaises(ApiError) as cm:
            viewer.list_runs(created_after="yesterday")
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "created_after"))

    def test_budgets_and_llm_caps(self) -> None:
        acme = viewer.budgets(tenant="acme")
        self.assertEqual(len(acme), 1)
        self.assertEqual(
            {k: acme[0].get(k) for k in ("tenant", "limit_micros", "spent_micros", "reserved_micros", "left_micros")},
            {"tenant": "acme", "limit_micros": 50_000_000, "spent_micros": 0, "reserved_micros": 0,
             "left_micros": 50_000_000},
        )
        self.assertIn("acme", [b["tenant"] for b in viewer.budgets()])
        self.assertEqual(viewer.budgets(tenant="nobody"), [])
        # the built-in fake provider's cap (this process runs it: serve executes)
        caps = viewer.llm_caps()
        fake = [c for c in caps if c["provider"] == "fake"]
        self.assertEqual(len(fake), 1, caps)
        self.assertGreaterEqual(fake[0]["cap"], 1)
        self.assertGreaterEqual(fake[0]["in_flight"], 0)
        self.assertTrue(all({"at", "cap", "reason"} <= h.keys() for h in fake[0]["history"]))
        self.assertEqual([c["provider"] for c in viewer.llm_caps(provider="fake")], ["fake"])
        self.assertEqual(viewer.llm_caps(provider="nobody"), [])
        self.assertTrue(all(c["history"] == [] for c in viewer.llm_caps(history=0)))
        with self.assertRaises(ApiError) as cm:
            viewer.llm_caps(history=65)
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "history"))

    def test_errors_are_typed(self) -> None:
        with self.assertRaises(ApiError) as cm:
            admin.start_run("no_such_workflow")
        self.assertEqual(cm.exception.status, 404)
        self.assertEqual(cm.exception.code, "not_found")
        with self.assertRaises(ApiError) as cm:
            admin.start_run("cl_tick", priority=12)
        self.assertEqual((cm.exception.status, cm.exception.code, cm.exception.field), (400, "invalid_argument", "priority"))
        with self.assertRaises(ApiError) as cm:
            viewer.get_run("r_does_not_exist")
        self.assertEqual(cm.exception.code, "not_found")
        self.assertIn("HTTP 404 not_found", str(cm.exception))

    def test_gate_decide_rerun_follow(self) -> None:
        run = approver.start_run("cl_gate", idempotency_key="py-gate")
        wait_for("the run to pause", lambda: viewer.get_run(run["id"])["status"] == "paused")
        gate = viewer.gate(run["id"])
        assert gate is not None
        self.assertEqual(gate["step_id"], "review")
        self.assertTrue(gate["proposal_digest"].startswith("sha256:"))
        with self.assertRaises(ApiError) as cm:
            approver.decide(run["id"], "sha256:" + "0" * 64, "approve")
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "stale_digest"))
        with self.assertRaises(ApiError) as cm:
            viewer.decide(run["id"], gate["proposal_digest"], "approve")
        self.assertEqual(cm.exception.status, 403)
        approver.decide(run["id"], gate["proposal_digest"], "edit", edited={"action": "ship later"})
        msgs = list(viewer.follow(run["id"]))
        self.assertEqual(seqs(msgs), list(range(1, len(msgs) + 1)))
        self.assertEqual(msgs[-1].event, "run.finished")
        self.assertEqual(viewer.get_run(run["id"])["status"], "completed")
        self.assertIsNone(viewer.gate(run["id"]))
        last = msgs[-1].seq or 0
        # a rerun from the review phase: a new revision, paused at the gate again
        rerun = approver.rerun(run["id"], "review", feedback="once more")
        self.assertEqual(rerun["revision"], 2)
        wait_for("the rerun to pause", lambda: viewer.get_run(run["id"])["status"] == "paused")
        gate2 = viewer.gate(run["id"])
        assert gate2 is not None
        approver.decide(run["id"], gate2["proposal_digest"], "reject")
        more = list(viewer.follow(run["id"], after=last))
        self.assertEqual(seqs(more), list(range(last + 1, last + 1 + len(more))))
        self.assertEqual(viewer.get_run(run["id"])["status"], "rejected")

    def test_signal_and_cancel(self) -> None:
        run = admin.start_run("cl_wait")
        wait_for("the run to wait", lambda: viewer.get_run(run["id"])["status"] == "waiting")
        self.assertEqual(viewer.get_run(run["id"])["waiting_for"]["signal"], "payment")  # type: ignore[index]
        with self.assertRaises(ApiError) as cm:
            admin.signal(run["id"], "no_such_signal", {})
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "name"))
        sent = admin.signal(run["id"], "payment", {"amount": 5}, idempotency_key="pay-1")
        self.assertTrue(sent["created"])
        self.assertTrue(sent["resolved"])
        again = admin.signal(run["id"], "payment", {"amount": 5}, idempotency_key="pay-1")
        self.assertFalse(again["created"])
        self.assertEqual(again["seq"], sent["seq"])
        wait_for("the run to complete", lambda: viewer.get_run(run["id"])["status"] == "completed")
        sigs = viewer.signals(run["id"])
        self.assertEqual(len(sigs), 1)
        self.assertTrue(sigs[0]["consumed"])
        self.assertEqual(sigs[0]["payload"], {"amount": 5})
        # cancel a run that waits
        run2 = admin.start_run("cl_wait")
        wait_for("the run to wait", lambda: viewer.get_run(run2["id"])["status"] == "waiting")
        self.assertEqual(admin.cancel(run2["id"])["status"], "cancelled")
        with self.assertRaises(ApiError) as cm:
            admin.signal(run2["id"], "payment")
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "finished"))

    def test_schedules(self) -> None:
        s = admin.create_schedule("py-every-second", "cl_tick", "* * * * * *", overlap="allow", catch_up="none")
        self.assertEqual(s["cron"], "* * * * * *")
        self.assertEqual(s["timezone"], "UTC")
        with self.assertRaises(ApiError) as cm:
            admin.create_schedule("py-every-second", "cl_tick", "* * * * * *")
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "already_exists"))
        with self.assertRaises(ApiError) as cm:
            admin.create_schedule("py-bad", "cl_tick", "not a cron")
        self.assertEqual(cm.exception.field, "cron")
        fired = wait_for("a tick to start a run", lambda: viewer.get_schedule("py-every-second").get("last_run_id"))
        self.assertTrue(viewer.get_run(fired)["idempotency_key"].startswith("schedule:py-every-second:"))
        self.assertIn("py-every-second", [x["id"] for x in viewer.list_schedules()])
        self.assertTrue(admin.pause_schedule("py-every-second")["paused"])
        self.assertFalse(admin.resume_schedule("py-every-second")["paused"])
        admin.delete_schedule("py-every-second")
        with self.assertRaises(ApiError) as cm:
            viewer.get_schedule("py-every-second")
        self.assertEqual(cm.exception.code, "not_found")

    def test_limits_and_timeouts(self) -> None:
        small = Client(server.url, SECRETS[2], timeout=5, max_body_bytes=64)
        with self.assertRaises(ResponseTooLarge):
            small.workflows()
        run = admin.start_run("cl_tick")
        wait_for("the run to finish", lambda: viewer.get_run(run["id"])["status"] == "completed")
        short_lines = Client(server.url, SECRETS[2], timeout=5, max_line_bytes=32)
        with self.assertRaises(ResponseTooLarge):
            list(short_lines.follow(run["id"]))
        # a server that accepts and never answers: a TransportError after the timeout
        silent = socket.create_server(("127.0.0.1", 0))
        try:
            c = Client(f"http://127.0.0.1:{silent.getsockname()[1]}", "t", timeout=0.5)
            t0 = time.monotonic()
            with self.assertRaises(TransportError):
                c.me()
            self.assertLess(time.monotonic() - t0, 3)
        finally:
            silent.close()
        # a refused connection is a TransportError too, and says nothing of the token
        port = socket.create_server(("127.0.0.1", 0))
        free = port.getsockname()[1]
        port.close()
        with self.assertRaises(TransportError) as cm:
            Client(f"http://127.0.0.1:{free}", SECRETS[0], timeout=2).me()
        self.assertNotIn(SECRETS[0], str(cm.exception))

    def test_stream_cut_by_proxy_resumes_without_gap(self) -> None:
        # cut six connections after 400 to 900 bytes (events are 200 to 400
        # bytes, so mid-event, after an `id:` line or inside `data:`); the
        # client must see 1..N once each.
        run = admin.start_run("cl_steps")
        proxy = CuttingProxy(server.port, cut_after=[700, 455, 903, 612, 398, 777], cuts=6)
        try:
            c = Client(f"http://127.0.0.1:{proxy.port}", SECRETS[2], timeout=10)
            msgs = list(c.follow(run["id"]))
        finally:
            proxy.close()
        got = seqs(msgs)
        self.assertEqual(got, list(range(1, len(got) + 1)), "every seq once, in order")
        self.assertEqual(msgs[-1].event, "run.finished")
        self.assertEqual(got[-1], viewer.get_run(run["id"])["last_event_seq"])
        self.assertGreaterEqual(proxy.connections, 7, "the stream was cut and reopened")
        stored = [e["seq"] for e in viewer.events(run["id"])]
        self.assertEqual(got, stored)

    def test_stream_cut_by_restart_resumes_without_gap(self) -> None:
        # The run waits for a signal across the restart, so events come on
        # both sides of the cut however slow the machine is.
        global server
        run = admin.start_run("cl_wait")
        msgs: list[StreamMessage] = []
        errors: list[BaseException] = []
        c = Client(server.url, SECRETS[2], timeout=10, reconnect_timeout=20)

        def follow() -> None:
            try:
                for m in c.follow(run["id"]):
                    msgs.append(m)
            except BaseException as e:  # noqa: BLE001  (reported below)
                errors.append(e)

        t = threading.Thread(target=follow)
        t.start()
        wait_for("the run to wait", lambda: viewer.get_run(run["id"])["status"] == "waiting")
        wait_for("its events so far", lambda: seqs(msgs)[-1:] == [viewer.get_run(run["id"])["last_event_seq"]])
        port = server.port
        self.assertEqual(server.stop(), 0, "serve stops gracefully")
        seen_at_cut = len(msgs)
        time.sleep(0.5)  # the client tries to reconnect meanwhile (refused)
        server = Server(port)
        admin.signal(run["id"], "payment", {"amount": 1})
        t.join(30)
        self.assertFalse(t.is_alive(), "the follow ended")
        self.assertEqual(errors, [])
        got = seqs(msgs)
        self.assertEqual(got, list(range(1, len(got) + 1)), "every seq once, in order")
        self.assertGreater(len(got), seen_at_cut, "events after the restart came")
        self.assertEqual(msgs[-1].event, "run.finished")
        self.assertEqual(viewer.get_run(run["id"])["status"], "completed")
        self.assertEqual(got, [e["seq"] for e in viewer.events(run["id"])])

    def test_stream_that_goes_silent_is_reopened(self) -> None:
        # the first connection stops mid-event and stays open: after
        # stream_idle_timeout the client counts it as cut and reconnects
        run = admin.start_run("cl_steps")
        proxy = CuttingProxy(server.port, cut_after=[600], cuts=1, stall=True)
        try:
            c = Client(f"http://127.0.0.1:{proxy.port}", SECRETS[2], timeout=10, stream_idle_timeout=1)
            t0 = time.monotonic()
            got = seqs(list(c.follow(run["id"])))
        finally:
            proxy.close()
        self.assertEqual(got, [e["seq"] for e in viewer.events(run["id"])])
        self.assertEqual(got, list(range(1, len(got) + 1)))
        # 2, unless a loaded machine let the live stream go quiet for 1 s again
        self.assertGreaterEqual(proxy.connections, 2)
        self.assertLess(time.monotonic() - t0, 10)

    def test_stream_errors(self) -> None:
        with self.assertRaises(ApiError) as cm:
            list(viewer.follow("r_does_not_exist"))
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        # nobody listening: it retries, then gives up after reconnect_timeout
        probe = socket.create_server(("127.0.0.1", 0))
        free = probe.getsockname()[1]
        probe.close()
        c = Client(f"http://127.0.0.1:{free}", SECRETS[2], timeout=2, reconnect_timeout=1)
        t0 = time.monotonic()
        with self.assertRaises(TransportError):
            list(c.follow("r_any"))
        self.assertLess(time.monotonic() - t0, 5)

    def test_follow_live_model_text(self) -> None:
        run = admin.start_run("cl_stream")
        msgs = list(viewer.follow(run["id"], live=True))
        live = [m for m in msgs if m.id is None]
        self.assertTrue(live, "streamed text came")
        self.assertTrue(all(m.event.startswith("llm.") and m.data["path"] == "talk" for m in live))
        self.assertEqual(seqs(msgs), [e["seq"] for e in viewer.events(run["id"])])
        self.assertEqual([m for m in viewer.follow(run["id"]) if m.id is None], [])

    def test_watch_runs(self) -> None:
        # Resumed from an id taken before the runs started, the stream first
        # sends the current state of every run changed since (the completed
        # one); then live changes (the waiting one, cancelled once the stream
        # is open).
        since = int(time.time() * 1e6)
        done = admin.start_run("cl_tick")
        wait_for("the run to complete", lambda: viewer.get_run(done["id"])["status"] == "completed")
        waiting = admin.start_run("cl_wait")
        wait_for("the run to wait", lambda: viewer.get_run(waiting["id"])["status"] == "waiting")
        seen: list[tuple[str, str]] = []

        def watch() -> None:
            stream = viewer.watch_runs(after=since)
            for m in stream:
                if m.event != "run":
                    continue
                seen.append((m.data["run_id"], m.data["status"]))
                if seen[-1] == (done["id"], "completed") and seen.count(seen[-1]) == 1:  # resumes may send it twice
                    admin.cancel(waiting["id"])
                if seen[-1] == (waiting["id"], "cancelled"):
                    break
            stream.close()

        t = threading.Thread(target=watch, daemon=True)
        t.start()
        t.join(15)
        self.assertFalse(t.is_alive(), f"the changes came (seen: {seen})")
        self.assertIn((done["id"], "completed"), seen)


def main() -> int:
    global BINARY, WORK, DB
    args = sys.argv[1:]
    BINARY = args[0] if args else os.environ.get("RUNLOOM_BINARY", "")
    if not BINARY:
        print("usage: test_client.py RUNLOOM_BINARY [WORK_DIR]", file=sys.stderr)
        return 2
    WORK = Path(args[1]) if len(args) > 1 else Path(tempfile.mkdtemp(prefix="runloom-client-py-"))
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    DB = WORK / "clients.db"
    print(f"runloom_client from {Path(runloom_client.__file__).parent}")
    prog = unittest.main(argv=[sys.argv[0], "-v"], exit=False)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
