"""The client: JSON requests and resumable Server-Sent Event streams.

Standard library only (http.client, json, urllib.parse). Every request has a
timeout; every response body and every SSE line is read up to a size limit
(past it: ResponseTooLarge, never unbounded memory). The token is sent in the
Authorization header and kept out of every repr, message and log.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import ssl
import time
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Generator, Iterator, Literal, Mapping, TypedDict, Unpack, cast

__all__ = [
    "ApiError",
    "Budget",
    "Client",
    "Event",
    "Gate",
    "LlmCap",
    "ProtocolError",
    "ResponseTooLarge",
    "Run",
    "RunFilter",
    "RunPage",
    "RunloomError",
    "Schedule",
    "Signal",
    "StreamMessage",
    "TransportError",
]

Decision = Literal["approve", "edit", "reject", "request_revision"]
Overlap = Literal["skip", "allow", "cancel"]
CatchUp = Literal["none", "latest", "all"]

# ---------------------------------------------------------------- wire forms
# The JSON the server answers with (docs/openapi.yaml, components/schemas).
# total=False: a newer server may add fields and a client must not break.


class Run(TypedDict, total=False):
    id: str
    workflow: str
    workflow_version: int
    workflow_digest: str
    status: str
    inputs: dict[str, Any]
    inputs_digest: str
    idempotency_key: str
    phase: str
    revision: int
    entry: str
    pending_gate: dict[str, Any] | None
    rerun_from: str
    feedback: str
    budget: dict[str, Any] | None
    lease_owner: str
    lease_expires_at: str | None
    attempts: int
    max_attempts: int
    concurrency_key: str
    concurrency_limit: int
    priority: int
    cancel_requested: bool
    outcome: str
    error: str
    last_event_seq: int
    created_at: str
    updated_at: str
    finished_at: str | None
    waiting_for: dict[str, Any] | None
    parent_run_id: str | None
    parent_step_path: str | None
    step_counts: dict[str, int]


class Gate(TypedDict, total=False):
    path: str
    step_id: str
    phase: str
    proposal: Any
    proposal_digest: str
    allow: list[str]
    revision_phase: str
    title: str


class Event(TypedDict, total=False):
    run_id: str
    seq: int
    type: str
    data: dict[str, Any]
    at: str
    schema_version: int


class Signal(TypedDict, total=False):
    run_id: str
    seq: int
    name: str
    payload: Any
    idempotency_key: str
    received_at: str
    consumed: bool
    consumed_at: str | None
    created: bool  # only in the answer to a send
    resolved: bool  # only in the answer to a send


class Schedule(TypedDict, total=False):
    id: str
    workflow: str
    cron: str
    timezone: str
    inputs: dict[str, Any]
    overlap: str
    catch_up: str
    paused: bool
    next_fire_at: str
    last_run_id: str | None
    last_fired_at: str | None
    created_at: str
    updated_at: str


class Budget(TypedDict, total=False):
    """A tenant's budget row, in micro-units (millionths of the price unit)."""

    tenant: str
    limit_micros: int | None  # None: tracked, not limited
    spent_micros: int
    reserved_micros: int  # model calls in flight
    left_micros: int | None  # limit - spent - reserved; None without a limit


class LlmCapChange(TypedDict, total=False):
    at: str
    cap: int
    reason: str  # the limiters, as the controller logs them: "aimd 2, telemetry -, pool -, cpu 1"


class LlmCap(TypedDict, total=False):
    """An llm concurrency cap of the serving process, with its recent changes (oldest first)."""

    provider: str
    cap: int
    in_flight: int
    history: list[LlmCapChange]


class RunFilter(TypedDict, total=False):
    """The filters of list_runs and iter_runs (GET /api/v1/runs), all optional."""

    status: str
    workflow: str
    parent: str  # only the child runs of this run
    tenant: str  # the run's budget tenant
    input_id: str  # the idempotency key, or any top-level input with this string or integer value
    created_after: str | datetime  # inclusive; RFC 3339, or a datetime (sent in UTC)
    created_before: str | datetime  # exclusive


@dataclass(frozen=True)
class RunPage:
    """One page of GET /api/v1/runs; next_cursor is "" on the last page."""

    runs: list[Run]
    next_cursor: str


@dataclass(frozen=True)
class StreamMessage:
    """One message of an event stream.

    For a run's stream, `event` is the event's type and `data` its envelope
    (an Event); `id` is its seq as text. Live model text (`llm.delta`,
    `llm.reset`, `llm.end`) has id None and is only yielded when asked for.
    """

    event: str
    data: Any
    id: str | None = None

    @property
    def seq(self) -> int | None:
        return int(self.id) if self.id is not None and self.id.isdigit() else None


# -------------------------------------------------------------------- errors


class RunloomError(Exception):
    """Every error this client raises."""


class ApiError(RunloomError):
    """The server answered with an error: HTTP status and its {code, message, field}."""

    def __init__(self, status: int, code: str, message: str, field: str = "", method: str = "", path: str = ""):
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.method = method
        self.path = path
        where = f"{method} {path}: " if method else ""
        text = f"{where}HTTP {status} {code or 'error'}: {message}"
        if field:
            text += f" (field {field})"
        super().__init__(text)


class TransportError(RunloomError):
    """The request did not get an answer: connection refused or reset, a timeout."""


class ProtocolError(RunloomError):
    """The server's answer is not what the API promises (not JSON, a bad frame)."""


class ResponseTooLarge(ProtocolError):
    """A response body, SSE line or SSE event is over the client's limit."""


# -------------------------------------------------------------------- client


def _q(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def _time(t: str | datetime | None) -> str | None:
    """An RFC 3339 time for a query: a string as given; a datetime in UTC
    (a naive one is taken as local time, as datetime.astimezone does)."""
    if t is None or isinstance(t, str):
        return t
    return t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass
class _SseParser:
    """The SSE framing (HTML Living Standard, "Server-sent events"), bounded."""

    max_event_bytes: int
    data: list[str] = field(default_factory=list)
    size: int = 0
    event: str = ""
    id: str | None = None
    last_id: str | None = None
    ended: bool = False
    opened: bool = False

    def line(self, text: str) -> StreamMessage | None:
        if text == "":
            msg = None
            if self.id is not None:
                self.last_id = self.id
            if self.data:
                raw = "\n".join(self.data)
                try:
                    value: Any = json.loads(raw)
                except ValueError:
                    value = raw
                msg = StreamMessage(event=self.event or "message", data=value, id=self.id)
            self.data, self.size, self.event, self.id = [], 0, "", None
            return msg
        if text.startswith(":"):
            if text == ": end":
                self.ended = True
            return None
        name, sep, value = text.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self.size += len(value) + 1
            if self.size > self.max_event_bytes:
                raise ResponseTooLarge(f"an SSE event is over {self.max_event_bytes} bytes")
            self.data.append(value)
        elif name == "event":
            self.event = value
        elif name == "id" and "\0" not in value:
            self.id = value
        return None


class Client:
    """A client of one runloom server's HTTP API (/api/v1).

    base_url: e.g. "http://127.0.0.1:8080". token: a token of `runloom token
    create` (None for a server run with --insecure-no-auth). timeout: seconds
    for each request (connect, each read, and the whole body). max_body_bytes:
    the largest JSON answer read; max_line_bytes / max_event_bytes bound an
    event stream's lines and events. stream_idle_timeout: seconds without a
    byte (the server sends a keep-alive every 15 s) before a stream counts as
    cut. reconnect_timeout: how long a stream keeps reconnecting without
    getting anything before it raises the last error.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        max_body_bytes: int = 16 << 20,
        max_line_bytes: int = 4 << 20,
        max_event_bytes: int = 16 << 20,
        stream_idle_timeout: float = 45.0,
        reconnect_timeout: float = 60.0,
        ssl_context: ssl.SSLContext | None = None,
    ):
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("base_url must be http://host[:port] or https://host[:port]")
        if u.username or u.password:
            raise ValueError("base_url must not carry credentials; pass token=")
        self.base_url = base_url.rstrip("/")
        self._scheme = u.scheme
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path.rstrip("/")
        self.__token = token
        self.timeout = timeout
        self.max_body_bytes = max_body_bytes
        self.max_line_bytes = max_line_bytes
        self.max_event_bytes = max_event_bytes
        self.stream_idle_timeout = stream_idle_timeout
        self.reconnect_timeout = reconnect_timeout
        self._ssl = ssl_context

    def __repr__(self) -> str:
        auth = "token=<hidden>" if self.__token else "no token"
        return f"Client({self.base_url!r}, {auth})"

    # ------------------------------------------------------------ transport

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=timeout, context=self._ssl or ssl.create_default_context()
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _headers(self, accept: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        h = {"Accept": accept, "User-Agent": "runloom-client-python/0.1"}
        if self.__token:
            h["Authorization"] = f"Bearer {self.__token}"
        if extra:
            h.update(extra)
        return h

    @staticmethod
    def _query(params: Mapping[str, Any]) -> str:
        kept = {k: str(v) for k, v in params.items() if v is not None}
        return "?" + urllib.parse.urlencode(kept) if kept else ""

    def _read_body(self, resp: http.client.HTTPResponse, deadline: float, method: str, path: str) -> bytes:
        length = resp.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            raise ResponseTooLarge(f"{method} {path}: the answer is {length} bytes, over {self.max_body_bytes}")
        chunks: list[bytes] = []
        size = 0
        while True:
            if time.monotonic() > deadline:
                raise TransportError(f"{method} {path}: timed out after {self.timeout} s reading the answer")
            chunk = resp.read1(65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > self.max_body_bytes:
                raise ResponseTooLarge(f"{method} {path}: the answer is over {self.max_body_bytes} bytes")
            chunks.append(chunk)

    @staticmethod
    def _error(status: int, raw: bytes, method: str, path: str) -> ApiError:
        code, message, fld = "", raw[:200].decode("utf-8", "replace").strip(), ""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        if isinstance(body, dict):
            code = str(body.get("code", ""))
            message = str(body.get("message", message))
            fld = str(body.get("field", "") or "")
        return ApiError(status, code, message or http.client.responses.get(status, ""), fld, method, path)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        raw: bool = False,
    ) -> Any:
        """One JSON request to `path` (under the base URL, e.g. "/api/v1/me").

        Returns the parsed JSON answer (None when empty; the text when raw).
        Raises ApiError for an HTTP error, TransportError when no answer came
        in time, ResponseTooLarge / ProtocolError for a bad answer.
        """
        target = self._prefix + path + self._query(query or {})
        extra = dict(headers or {})
        data: bytes | None = None
        if body is not None:
            data = json.dumps(body).encode()
            extra["Content-Type"] = "application/json"
        deadline = time.monotonic() + self.timeout
        conn = self._connect(self.timeout)
        resp: http.client.HTTPResponse | None = None
        try:
            try:
                conn.request(method, target, body=data, headers=self._headers("application/json", extra))
                resp = conn.getresponse()
                payload = self._read_body(resp, deadline, method, path)
            except (OSError, http.client.HTTPException) as e:
                raise TransportError(f"{method} {path}: {type(e).__name__}: {e}") from None
            if resp.status >= 400:
                raise self._error(resp.status, payload, method, path)
            if not 200 <= resp.status < 300:  # redirects are not followed: the token stays here
                raise ProtocolError(f"{method} {path}: unexpected HTTP {resp.status}")
            if raw:
                return payload.decode("utf-8", "replace")
            if not payload:
                return None
            try:
                return json.loads(payload)
            except ValueError:
                raise ProtocolError(f"{method} {path}: the answer is not JSON") from None
        finally:
            if resp is not None:
                resp.close()
            conn.close()

    # --------------------------------------------------------------- health

    def healthz(self) -> dict[str, Any]:
        return cast(dict[str, Any], self.request("GET", "/healthz"))

    def readyz(self) -> dict[str, Any]:
        return cast(dict[str, Any], self.request("GET", "/readyz"))

    def me(self) -> dict[str, str]:
        """The token's principal: {name, role}."""
        return cast(dict[str, str], self.request("GET", "/api/v1/me"))

    # ----------------------------------------------------------------- runs

    def start_run(
        self,
        workflow: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        version: int | None = None,
        priority: int | None = None,
        budget_micros: int | None = None,
        traceparent: str | None = None,
    ) -> Run:
        """Starts a run of a catalog workflow (operator).

        The same idempotency_key (per workflow) answers the first run again
        and writes nothing: a retry of a start whose answer was lost is safe.
        """
        body: dict[str, Any] = {"workflow": workflow, "inputs": dict(inputs or {})}
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        if version is not None:
            body["version"] = version
        if priority is not None:
            body["priority"] = priority
        if budget_micros is not None:
            body["budget_micros"] = budget_micros
        headers = {"traceparent": traceparent} if traceparent else None
        return cast(Run, self.request("POST", "/api/v1/runs", body, headers=headers))

    def get_run(self, run_id: str) -> Run:
        """One run, with its step_counts."""
        return cast(Run, self.request("GET", f"/api/v1/runs/{_q(run_id)}"))

    def list_runs(
        self, *, limit: int | None = None, cursor: str | None = None, **filters: Unpack[RunFilter]
    ) -> RunPage:
        """One page of runs, newest first, matching the filters (RunFilter):
        status, workflow, parent; tenant (the run's budget tenant), input_id
        (the idempotency key, or any top-level input with this string or
        integer value), created_after (inclusive) / created_before
        (exclusive), RFC 3339 strings or datetimes."""
        unknown = filters.keys() - RunFilter.__optional_keys__
        if unknown:
            raise TypeError(f"list_runs() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        q: dict[str, Any] = {k: _time(v) if k.startswith("created_") else v for k, v in filters.items()}
        got = self.request("GET", "/api/v1/runs", query={**q, "limit": limit, "cursor": cursor or None})
        return RunPage(runs=cast(list[Run], got.get("runs", [])), next_cursor=str(got.get("next_cursor", "")))

    def iter_runs(self, *, page_size: int | None = None, **filters: Unpack[RunFilter]) -> Iterator[Run]:
        """Every run matching the filters (those of list_runs), newest first, page by page."""
        cursor = ""
        while True:
            page = self.list_runs(limit=page_size, cursor=cursor, **filters)
            yield from page.runs
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def steps(self, run_id: str, *, revision: int | None = None) -> list[dict[str, Any]]:
        got = self.request("GET", f"/api/v1/runs/{_q(run_id)}/steps", query={"revision": revision})
        return cast(list[dict[str, Any]], got.get("steps", []))

    def writes(self, run_id: str) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self.request("GET", f"/api/v1/runs/{_q(run_id)}/writes").get("writes", []))

    def events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[Event]:
        """Stored events with a seq after `after` (at most `limit`, server max 1000)."""
        got = self.request("GET", f"/api/v1/runs/{_q(run_id)}/events", query={"after": after, "limit": limit})
        return cast(list[Event], got.get("events", []))

    def cancel(self, run_id: str) -> Run:
        return cast(Run, self.request("POST", f"/api/v1/runs/{_q(run_id)}/cancel", {}))

    def rerun(self, run_id: str, from_phase: str, *, feedback: str | None = None) -> Run:
        body: dict[str, Any] = {"from_phase": from_phase}
        if feedback is not None:
            body["feedback"] = feedback
        return cast(Run, self.request("POST", f"/api/v1/runs/{_q(run_id)}/rerun", body))

    # ---------------------------------------------------------------- gates

    def gate(self, run_id: str) -> Gate | None:
        """The gate a paused run waits on; None when it waits on none."""
        try:
            return cast(Gate, self.request("GET", f"/api/v1/runs/{_q(run_id)}/gate"))
        except ApiError as e:
            if e.status == 404 and e.code == "no_pending_gate":
                return None
            raise

    def decide(
        self,
        run_id: str,
        digest: str,
        decision: Decision,
        *,
        edited: Any = None,
        feedback: str | None = None,
        from_phase: str | None = None,
    ) -> Run:
        """Decides the gate whose proposal has `digest` (approver).

        A 409 (stale_digest, not_paused) records nothing: read gate() again.
        """
        body: dict[str, Any] = {"digest": digest, "decision": decision}
        if edited is not None:
            body["edited"] = edited
        if feedback is not None:
            body["feedback"] = feedback
        if from_phase is not None:
            body["from_phase"] = from_phase
        return cast(Run, self.request("POST", f"/api/v1/runs/{_q(run_id)}/decisions", body))

    # -------------------------------------------------------------- signals

    def signal(
        self, run_id: str, name: str, payload: Any = None, *, idempotency_key: str | None = None
    ) -> Signal:
        """Sends a signal (operator). `created` is False when the idempotency
        key matched a signal kept before; `resolved` True when it woke the run."""
        body: dict[str, Any] = {"payload": payload}
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        return cast(Signal, self.request("POST", f"/api/v1/runs/{_q(run_id)}/signals/{_q(name)}", body))

    def signals(self, run_id: str) -> list[Signal]:
        return cast(list[Signal], self.request("GET", f"/api/v1/runs/{_q(run_id)}/signals").get("signals", []))

    # ------------------------------------------------------------ schedules

    def create_schedule(
        self,
        schedule_id: str,
        workflow: str,
        cron: str,
        *,
        timezone: str | None = None,
        inputs: Mapping[str, Any] | None = None,
        overlap: Overlap | None = None,
        catch_up: CatchUp | None = None,
    ) -> Schedule:
        body: dict[str, Any] = {"id": schedule_id, "workflow": workflow, "cron": cron}
        for k, v in (("timezone", timezone), ("overlap", overlap), ("catch_up", catch_up)):
            if v is not None:
                body[k] = v
        if inputs is not None:
            body["inputs"] = dict(inputs)
        return cast(Schedule, self.request("POST", "/api/v1/schedules", body))

    def get_schedule(self, schedule_id: str) -> Schedule:
        return cast(Schedule, self.request("GET", f"/api/v1/schedules/{_q(schedule_id)}"))

    def list_schedules(self, *, after: str | None = None, limit: int | None = None) -> list[Schedule]:
        got = self.request("GET", "/api/v1/schedules", query={"after": after, "limit": limit})
        return cast(list[Schedule], got.get("schedules", []))

    def pause_schedule(self, schedule_id: str) -> Schedule:
        return cast(Schedule, self.request("POST", f"/api/v1/schedules/{_q(schedule_id)}/pause", {}))

    def resume_schedule(self, schedule_id: str) -> Schedule:
        return cast(Schedule, self.request("POST", f"/api/v1/schedules/{_q(schedule_id)}/resume", {}))

    def delete_schedule(self, schedule_id: str) -> None:
        self.request("DELETE", f"/api/v1/schedules/{_q(schedule_id)}")

    # ------------------------------------------------------------ workflows

    def register_workflow(self, yaml: str) -> dict[str, Any]:
        """Registers a workflow from YAML (admin); the same definition again is a no-op."""
        return cast(dict[str, Any], self.request("POST", "/api/v1/workflows", {"yaml": yaml}))

    def workflows(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self.request("GET", "/api/v1/workflows").get("workflows", []))

    def workflow(self, name: str, *, version: int | None = None) -> dict[str, Any]:
        return cast(dict[str, Any], self.request("GET", f"/api/v1/workflows/{_q(name)}", query={"version": version}))

    # ---------------------------------------------------- budgets and caps

    def budgets(self, *, tenant: str | None = None) -> list[Budget]:
        """Every tenant's budget row, by name (only `tenant`'s when given: [] if it has none)."""
        return cast(list[Budget], self.request("GET", "/api/v1/budgets", query={"tenant": tenant}).get("budgets", []))

    def llm_caps(self, *, provider: str | None = None, history: int | None = None) -> list[LlmCap]:
        """The llm concurrency caps the serving process runs, each with its
        newest `history` changes (default and most: 64; this process's, in
        memory). Empty from a `serve --no-executors`."""
        got = self.request("GET", "/api/v1/llm/caps", query={"provider": provider, "history": history})
        return cast(list[LlmCap], got.get("caps", []))

    # -------------------------------------------------------------- streams

    def follow(
        self, run_id: str, *, after: int = 0, live: bool = False
    ) -> Generator[StreamMessage, None, None]:
        """A run's events as they happen, until the run is finished.

        Yields the stored events after seq `after` in order, then the new ones;
        ends when the server ends the stream (`: end`: the run is terminal).
        A stream closed without `: end` (a restart of `serve`, a dropped
        connection, no byte for stream_idle_timeout) is reopened with
        Last-Event-ID, so every seq comes exactly once. live=True also yields
        the streamed model text (llm.delta / llm.reset / llm.end, no id).
        """
        path = f"/api/v1/runs/{_q(run_id)}/events"
        for msg in self._stream(path, str(after) if after else None, endless=False):
            if msg.id is not None or live:
                yield msg

    def watch_runs(self, *, after: int | None = None) -> Generator[StreamMessage, None, None]:
        """Every run's status changes (`run`: {run_id, status, last_event_seq};
        `reset`: re-read the runs). Never ends; reconnects with Last-Event-ID."""
        return self._stream("/api/v1/events", str(after) if after is not None else None, endless=True)

    def _stream(self, path: str, last_id: str | None, *, endless: bool) -> Generator[StreamMessage, None, None]:
        delay = 0.2
        last_progress = time.monotonic()
        while True:
            parser = _SseParser(self.max_event_bytes, last_id=last_id)
            try:
                for msg in self._stream_once(path, parser):
                    last_progress = time.monotonic()
                    delay = 0.2
                    last_id = parser.last_id
                    yield msg
                last_id = parser.last_id
                if parser.ended and not endless:
                    return
                error: RunloomError = TransportError(f"GET {path}: the stream was cut")
            except ApiError as e:
                if e.status < 500:
                    raise
                error = e
            except TransportError as e:
                error = e
            last_id = parser.last_id
            if parser.opened:
                last_progress = max(last_progress, time.monotonic())
            # A cut: reconnect after a growing, jittered pause, with the last id.
            if time.monotonic() - last_progress > self.reconnect_timeout:
                raise error
            time.sleep(delay * (0.5 + random.random() / 2))
            delay = min(delay * 2, 5.0)

    def _stream_once(self, path: str, parser: _SseParser) -> Generator[StreamMessage, None, None]:
        extra = {"Cache-Control": "no-cache"}
        if parser.last_id:
            extra["Last-Event-ID"] = parser.last_id
        conn = self._connect(self.timeout)
        resp: http.client.HTTPResponse | None = None
        try:
            try:
                conn.request("GET", self._prefix + path, headers=self._headers("text/event-stream", extra))
                sock = conn.sock  # getresponse() lets go of it for a Connection: close answer
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                raise TransportError(f"GET {path}: {type(e).__name__}: {e}") from None
            if resp.status >= 400:
                try:
                    payload = self._read_body(resp, time.monotonic() + self.timeout, "GET", path)
                except (OSError, http.client.HTTPException):
                    payload = b""
                raise self._error(resp.status, payload, "GET", path)
            if resp.status != 200 or not (resp.getheader("Content-Type") or "").startswith("text/event-stream"):
                raise ProtocolError(f"GET {path}: not an event stream (HTTP {resp.status})")
            parser.opened = True
            if sock is not None:
                sock.settimeout(self.stream_idle_timeout)
            while True:
                try:
                    line = resp.readline(self.max_line_bytes + 1)
                except (OSError, http.client.HTTPException, socket.timeout) as e:
                    raise TransportError(f"GET {path}: {type(e).__name__}: {e}") from None
                if not line:
                    return  # closed: `: end` was seen or the stream was cut
                if len(line) > self.max_line_bytes and not line.endswith(b"\n"):
                    raise ResponseTooLarge(f"GET {path}: an SSE line is over {self.max_line_bytes} bytes")
                if not line.endswith(b"\n"):
                    return  # a partial last line: cut mid-line, the message is dropped
                text = line.decode("utf-8", "replace").rstrip("\n").removesuffix("\r")
                msg = parser.line(text)
                if msg is not None:
                    yield msg
                if parser.ended:
                    return  # `: end` is the stream's last bytes: no need to wait for the close
        finally:
            if resp is not None:
                resp.close()
            conn.close()
