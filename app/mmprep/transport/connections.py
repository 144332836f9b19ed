"""What one HTTP connection may hold, and for how long: the server's own guard rails.

uvicorn's HTTP/1.1 protocol on httptools (llhttp, in C: 16% to 18% less server CPU per
streamed token than its h11 protocol at 2048 streams, docs/benchmarks.md), with the limits a
front door behind a load balancer needs and uvicorn lacks:

- idle: a new connection that sends nothing, or a kept-alive one between requests, is
  closed after --keep-alive-timeout (uvicorn closes only kept-alive ones: a connection
  that never sent a byte stayed open, an fd, forever);
- slowloris: a request head (request line and headers) must be complete within
  --header-timeout of its first byte, else 408 and close (uvicorn restarts its keep-alive
  timer on every byte, so a head sent a byte at a time held the connection for good), and
  within MAX_HEAD_BYTES, else 431 and close (llhttp and uvicorn keep a head of any size:
  200 MiB of headers took 200 MiB, a long URL quadratic time on the event loop);
- a request that is not HTTP gets its 400 after the answers before it (pipelined behind a
  stream, uvicorn's 400 was written into the middle of the stream);
- slow readers: a response's unsent bytes are held up to --send-buffer-bytes (beyond it
  the stream waits); a client whose TCP acknowledges no byte of it for --write-timeout
  (bytes it accepted, not a drain of the buffer: a slow but steady reader is kept) is cut
  off, whatever else closes the connection meanwhile (a close waits for the unsent bytes):
  the connection is reset, the app sees the client gone (its engine work stops, its
  admission slot and memory are given back), a log line and /metrics say so;
- too many connections: past --max-connections open, a connection's request is answered
  503 with Retry-After and the connection closed, at once, never reset;
- memory after a burst: an idle connection's objects are made again when the server goes
  idle (renew_idle_connections), so that a client's kept connections do not pin the
  burst's memory.

Each connection closed by one of these is counted in mmprep_connections_closed{reason}.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import http
import json
import logging
import os
import resource
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from ..core.errors import ServiceError
from ..core.metrics import Metrics

log = logging.getLogger("mmprep.connections")

MAX_HEAD_BYTES = 64 * 1024  # a request line and headers past this get 431 (h11 allowed 16 KiB, Node.js 16)
REFUSAL_BODY_DRAIN_BYTES = (
    1024**2
)  # read this much of a refused request, so the close after the 503 is not a reset
REQUEST_ID = "mmprep.request_id"  # the scope key where a route leaves the id it gave its request
WRITE_CHECKS_PER_TIMEOUT = 4  # how often a full buffer's client is looked at, per write timeout
TIMER_SLACK_S = 0.001  # a timer may fire a hair early
TCP_INFO_BYTES_ACKED = 120  # offset of tcpi_bytes_acked (u64) in Linux's struct tcp_info
FDS_BESIDES_CONNECTIONS = (
    256  # files the process needs besides its connections: logs, media, decoders, workers
)


@dataclass(frozen=True)
class ConnectionLimits:
    keep_alive_timeout: float  # seconds a connection may sit idle between requests (or before its first)
    header_timeout: float  # seconds from a request head's first byte to its last
    write_timeout: float  # seconds a full send buffer may go without the client reading any of it
    send_buffer_bytes: int  # unsent response bytes held per connection before the stream waits
    max_connections: int  # open connections; more get 503


def too_many_connections(limit: int) -> ServiceError:
    error = ServiceError(
        f"the server has its limit of {limit} connections open; retry shortly",
        "too_many_connections",
        status=503,
    )
    error.headers = {"Retry-After": "1", "Connection": "close"}
    return error


def guarded_protocol(limits: ConnectionLimits, metrics: Metrics, on_refused: Callable[[ServiceError], None]):
    """The protocol factory for uvicorn.Config(http=...)."""
    return functools.partial(GuardedProtocol, limits=limits, metrics=metrics, on_refused=on_refused)


class GuardedProtocol(HttpToolsProtocol):
    def __init__(
        self,
        *args,
        limits: ConnectionLimits,
        metrics: Metrics,
        on_refused: Callable[[ServiceError], None],
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        # uvicorn annotates it int, but only hands it to loop.call_later, which takes float seconds.
        self.timeout_keep_alive = limits.keep_alive_timeout  # type: ignore[assignment]
        self._limits, self._metrics, self._on_refused = limits, metrics, on_refused
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._acked: int | None = None  # bytes the client had acknowledged at the last check
        self._progress_at = 0.0  # when that count last grew (or the buffer filled)
        self._reading = ""  # what of a request the parser is in: "head", "body", or "" (neither)
        self._head_bytes = 0  # bytes received since the head being read began
        self._ended_in_read = False  # a request ended in the bytes being read
        # an error to answer once the answers before it are sent
        self._refusal: tuple[int, str, str] | None = None
        # The request being answered. httptools reads a pipelined request while the one
        # before it is answered, and uvicorn's self.cycle is then the newer one (queued).
        self._answering: RequestResponseCycle | None = None
        self._renewed_idle_until: float | None = None  # set on a renewal: the idle deadline it keeps

    # -- open and close ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        transport.set_write_buffer_limits(high=self._limits.send_buffer_bytes)
        self._metrics.connections_open.set(len(self.connections))
        idle_for: float = self.timeout_keep_alive
        if self._renewed_idle_until is not None:  # the same connection, renewed: its deadline stands
            idle_for = max(0.0, self._renewed_idle_until - self.loop.time())
        elif len(self.connections) > self._limits.max_connections:
            self.app = self._refuse  # its request gets the 503; the connection closes after it
            idle_for = min(
                idle_for, self._limits.header_timeout
            )  # and it may not sit on an fd past the limit
        # Idle from the start: a connection that never sends a byte is closed like a kept-alive one.
        self.timeout_keep_alive_task = self.loop.call_later(idle_for, self.timeout_keep_alive_handler)

    def connection_lost(self, exc: Exception | None) -> None:
        answering = self._answering
        if answering is not None and answering is not self.cycle and not answering.response_complete:
            # uvicorn tells only its self.cycle, a pipelined request queued behind this one:
            # the stream being answered must learn too, to stop and give its slot back.
            answering.disconnected = True
            answering.message_event.set()
        super().connection_lost(exc)
        self._cancel_timers()
        self._unset_keepalive_if_required()  # uvicorn leaves it set when the client reset the connection
        self._metrics.connections_open.set(len(self.connections))

    def _close(self, reason: str) -> None:
        """Count the connection as closed for `reason`; its clocks on reading stop. The write
        clock runs on: a close waits for the unsent bytes, and a client that reads none of them
        must still be cut off."""
        self._metrics.connections_closed.labels(reason).inc()
        for timer in (self._header_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._body_timer = None

    def _cancel_timers(self) -> None:
        for timer in (self._header_timer, self._body_timer, self._write_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._body_timer = self._write_timer = None

    # -- memory after a burst --------------------------------------------------------------

    async def renew(self) -> bool:
        """Hand this connection, if idle, to a new transport and protocol on a duplicate of
        its socket, and let these go; True if it was. The client sees nothing: no byte is
        pending either way, and a request arriving meanwhile waits in the kernel's buffer.

        Why: a connection opened during a burst has its 50-odd objects (transport, protocol,
        parser, flow control, timers) made among the burst's own, one or two in each page of
        the heap; when the burst's objects are freed, those pages stay, each pinned by a few
        live blocks (aiperf's 2048 kept connections held about 50 MB of otherwise free pages,
        docs/benchmarks.md). Made again once the burst is over, a connection's objects go
        into the few pages the allocator fills first, and the pinned pages go back."""
        transport, keep_alive = self.transport, self.timeout_keep_alive_task
        idle = self.cycle is None and not self._reading and not self.pipeline
        if keep_alive is None or not idle or transport.is_closing() or transport.get_write_buffer_size():
            return False
        sock = transport.get_extra_info("socket")
        # TLS state lives in the transport: such a connection stays as it is
        if sock is None or transport.get_extra_info("sslcontext") is not None:
            return False
        try:
            duplicate = socket.socket(fileno=os.dup(sock.fileno()))
        except OSError:  # out of file descriptors: it stays as it is
            return False
        successor = type(self)(
            config=self.config,
            server_state=self.server_state,
            app_state=self.app_state,
            limits=self._limits,
            metrics=self._metrics,
            on_refused=self._on_refused,
            _loop=self.loop,
        )
        successor._renewed_idle_until = keep_alive.when()
        self.connections.discard(self)  # before the successor counts itself among them
        self._unset_keepalive_if_required()
        transport.close()  # its descriptor; the duplicate keeps the connection open
        try:
            await self.loop.connect_accepted_socket(lambda: successor, sock=duplicate)
        except OSError:
            duplicate.close()  # the client left meanwhile: nothing is lost, nothing renewed
            return False
        return True

    # -- idle, and request heads that never end -------------------------------------------

    def timeout_keep_alive_handler(self) -> None:
        if not self.transport.is_closing():
            self._close("idle")
        super().timeout_keep_alive_handler()

    def data_received(self, data: bytes) -> None:
        if self._refusal is not None:  # what follows a request that could not be read is not read
            return
        continuing = self._reading == "head"
        self._ended_in_read = False
        super().data_received(data)
        if self.transport.get_protocol() is not self:  # handed to uvicorn's WebSocket protocol
            self._cancel_timers()
            self._unset_keepalive_if_required()
            return
        # A head that began in these bytes began at their start, unless a request ended in
        # them (pipelined): then where is not known, and they are not counted (one read more).
        if self._reading == "head" and (continuing or not self._ended_in_read):
            self._head_bytes = (self._head_bytes if continuing else 0) + len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse_request(
                    431, "request_header_fields_too_large", f"the request head is over {MAX_HEAD_BYTES} bytes"
                )
        self._watch_reading()

    def send_400_response(self, msg: str) -> None:  # uvicorn's answer to what llhttp cannot parse
        self._refuse_request(400, "invalid_http_request", msg)

    # the parser's callbacks, as a request arrives
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._reading = "head"

    def on_headers_complete(self) -> None:
        self._reading = "body"
        queued = len(self.pipeline)
        super().on_headers_complete()
        if len(self.pipeline) == queued and self.cycle is not None and not self.cycle.response_complete:
            self._answering = self.cycle  # started at once, not queued behind another

    def on_message_complete(self) -> None:
        self._reading = ""
        self._ended_in_read = True
        super().on_message_complete()
        self._forget_answered()  # a body that ended after its answer

    def _answering_earlier(self) -> bool:
        """A request before the one arriving is still being answered: the arriving one's
        clocks start when that answer ends (it is neither started nor timed until then)."""
        answering = self._answering is not None and not self._answering.response_complete
        return bool(self.pipeline) or (answering and self._reading != "body")

    def _watch_reading(self) -> None:
        """The clocks on a request still arriving: its head, and its body; or, with nothing
        arriving and nothing being answered, the idle clock."""
        closing = self.transport.is_closing()
        waiting = not closing and not self._answering_earlier()
        if waiting and self._reading == "" and self.timeout_keep_alive_task is None:
            # A body's last bytes came after its answer (uvicorn stopped the idle clock when
            # they arrived), or bytes that begin no request: idle again.
            self.timeout_keep_alive_task = contextvars.Context().run(
                self.loop.call_later, self.timeout_keep_alive, self.timeout_keep_alive_handler
            )
        if waiting and self._reading == "head":
            self._unset_keepalive_if_required()  # the head's own clock runs instead
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(self._limits.header_timeout, self._header_timed_out)
        elif self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        # A body that stops arriving: the same allowance of silence, restarted by every piece,
        # so a long upload that keeps coming is never cut off.
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        if waiting and self._reading == "body":
            self._body_timer = self.loop.call_later(self._limits.header_timeout, self._body_timed_out)

    def on_response_complete(self) -> None:
        queued = self.pipeline[-1][0] if self.pipeline else None  # the next to start, if any
        # uvicorn sets the keep-alive timer here, and a timer keeps a copy of the context it
        # was set in: this request's (its id, its log fields), for as long as the connection
        # idles. In an empty context it keeps nothing of the request.
        contextvars.Context().run(super().on_response_complete)
        if queued is not None and not (self.pipeline and self.pipeline[-1][0] is queued):
            self._answering = queued  # uvicorn started it
        self._forget_answered()
        if self._refusal is not None:  # a request that came early and could not be read
            self._refuse_request(*self._refusal)
        else:
            self._watch_reading()  # a request that came early (pipelined): its clocks start now

    def _forget_answered(self) -> None:
        """uvicorn keeps the last request's scope, cycle and headers until the next request:
        on a kept-alive connection that is what the app hung on the scope (exit stacks,
        closures, the route's state), 10 dicts and 10 functions a connection, held for as
        long as the client keeps it: 2048 idle connections held 30 MiB. Once a request is
        read whole and answered, with none behind it, they go (the app's task holds its own
        references while it finishes)."""
        answered = self.cycle is not None and self.cycle.response_complete
        if answered and self._reading == "" and not self.pipeline:
            self.cycle = self.scope = self.headers = None  # type: ignore[assignment]
            self._answering = None

    def _header_timed_out(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self._reading != "head" or self._answering_earlier():
            return
        log.info(
            "request head incomplete after the header timeout; connection closed",
            extra={"client": _address(self.client), "header_timeout_s": self._limits.header_timeout},
        )
        self._close("header_timeout")
        self._error_and_close(
            408,
            "request_timeout",
            "the request head (request line and headers) did not arrive within "
            f"{self._limits.header_timeout:g} s",
        )

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if self.transport.is_closing() or self._reading != "body" or self._answering_earlier():
            return
        if self.flow.read_paused:  # we stopped reading (the app is behind), not the client sending
            self._body_timer = self.loop.call_later(self._limits.header_timeout, self._body_timed_out)
            return
        log.info(
            "request body stalled past the header timeout; connection closed",
            extra={"client": _address(self.client), "header_timeout_s": self._limits.header_timeout},
        )
        self._close("body_timeout")
        if self.cycle is not None and self.cycle.response_started:  # an answer is on its way: no second one
            self.transport.close()
            return
        self._error_and_close(
            408,
            "request_timeout",
            f"the request body stopped arriving for {self._limits.header_timeout:g} s before its end",
        )

    def _refuse_request(self, status: int, code: str, message: str) -> None:
        """A request that cannot be read: its error, after the answers to the requests
        before it (pipelined ones), and the connection closed; nothing more is read."""
        if self.transport.is_closing():
            return
        if self._answering_earlier():
            self._refusal = (status, code, message)
            return
        log.info(
            "request refused before it was read", extra={"client": _address(self.client), "status": status}
        )
        self._close(code)
        self._error_and_close(status, code, message)

    def _error_and_close(self, status: int, code: str, message: str) -> None:
        """An error with OpenAI's error body, and the connection closed."""
        body = json.dumps(ServiceError(message, code, status=status).body()).encode()
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s"
            % (status, http.HTTPStatus(status).phrase.encode(), len(body), body)
        )
        self.transport.close()

    # -- slow readers --------------------------------------------------------------------

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._arm_write_timer()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _arm_write_timer(self) -> None:
        """The buffer is full: from now, a client that accepts no byte for the write timeout
        is cut off. What it accepted is what its TCP acknowledged, looked at every quarter of
        the timeout (where the kernel does not say, the timeout runs once, to the cut)."""
        self._acked, self._progress_at = bytes_acked(self.transport), self.loop.time()
        self._write_timer = self.loop.call_later(self._write_check_interval(), self._write_check)

    def _write_check_interval(self) -> float:
        timeout = self._limits.write_timeout
        return timeout if self._acked is None else timeout / WRITE_CHECKS_PER_TIMEOUT

    def _write_check(self) -> None:
        self._write_timer = None
        acked, now = bytes_acked(self.transport), self.loop.time()
        if acked is not None and self._acked is not None and acked > self._acked:
            self._acked, self._progress_at = acked, now  # it read some: a slow reader, not a stalled one
        if now - self._progress_at >= self._limits.write_timeout - TIMER_SLACK_S:
            self._cut_slow_reader()
            return
        self._write_timer = self.loop.call_later(self._write_check_interval(), self._write_check)

    def _cut_slow_reader(self) -> None:
        scope: dict = dict(self._answering.scope) if self._answering is not None else {}
        log.warning(
            "client stopped reading; connection cut off after the write timeout",
            extra={
                "client": _address(self.client),
                "path": scope.get("path"),
                # the server's id for the request (a route's), else the one the client sent
                "request_id": scope.get(REQUEST_ID)
                or dict(scope.get("headers", ())).get(b"x-request-id", b"").decode(errors="replace")
                or None,
                "unsent_bytes": self.transport.get_write_buffer_size(),
                "write_timeout_s": self._limits.write_timeout,
            },
        )
        if not self.transport.is_closing():  # else counted already, by what closed it
            self._close("write_timeout")
        # A reset, not a FIN after the kernel's unsent megabytes: the client learns at once
        # that the stream is over (a close would leave it waiting on a dead one).
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # abort, not close: close waits for the buffer to drain, which this client will never let happen.
        # The app then sees the client gone (http.disconnect) and stops its work.
        self.transport.abort()

    # -- too many connections -------------------------------------------------------------

    async def _refuse(self, scope, receive, send) -> None:
        """The answer to a request on a connection past the limit: 503, then close."""
        if scope["type"] != "http":
            return
        drained = 0
        while drained <= REFUSAL_BODY_DRAIN_BYTES:
            message = await receive()
            drained += len(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        error = too_many_connections(self._limits.max_connections)
        self._on_refused(error)
        self._close("over_limit")
        body = json.dumps(error.body()).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        headers += [(name.lower().encode(), value.encode()) for name, value in (error.headers or {}).items()]
        await send({"type": "http.response.start", "status": error.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def renew_idle_connections(connections: set) -> int:
    """Renew every idle connection (GuardedProtocol.renew), one after another (each closes
    its old descriptor before the next is duplicated: a process at its open-file limit
    needs one spare); how many were."""
    renewed, started = 0, time.perf_counter()
    for protocol in list(connections):
        if isinstance(protocol, GuardedProtocol) and await protocol.renew():
            renewed += 1
    if renewed:
        log.info(
            "idle connections renewed",
            extra={"renewed": renewed, "seconds": round(time.perf_counter() - started, 3)},
        )
    return renewed


def bytes_acked(transport: asyncio.BaseTransport) -> int | None:
    """The bytes of this connection the client's TCP has acknowledged (Linux's
    tcpi_bytes_acked), which grows only as the client's application reads; None where the
    kernel does not say (not Linux, not TCP)."""
    sock = transport.get_extra_info("socket")
    if sock is None or not hasattr(socket, "TCP_INFO"):
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_BYTES_ACKED + 8)
    except OSError:  # not TCP (a Unix socket)
        return None
    if len(info) < TCP_INFO_BYTES_ACKED + 8:  # a kernel older than 4.1
        return None
    return struct.unpack_from("Q", info, TCP_INFO_BYTES_ACKED)[0]


def _address(client: tuple[str, int] | None) -> str | None:
    return f"{client[0]}:{client[1]}" if client else None


def fit_open_files(max_connections: int) -> int:
    """Raise the soft open-file limit to fit `max_connections` (as far as the hard limit
    allows); the connections that fit. Past the limit accept() fails, and the kernel's
    backlog fills with connections nobody answers: better a 503 at a lower count."""
    needed = max_connections + FDS_BESIDES_CONNECTIONS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return max_connections
    allowed = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (allowed, hard))
    return max(1, min(max_connections, allowed - FDS_BESIDES_CONNECTIONS))
