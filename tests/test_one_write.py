"""An answer's head goes out with its body in one write, and nothing is held back for good:
unit tests of the held head over a transport that records its writes (a shortcut: they prove
the write pattern, not the server), then ``ductwork serve`` as the CLI starts it, on raw
keep-alive connections. The whole-answer extension is compared with uvicorn's ``send`` on
uvicorn itself with ``ductwork serve``'s protocol, in a thread, around a small app of the test's
own (a shortcut: it proves the bytes of the two ways, not the read API's answers); on the
same server, that an answered request's cycle is freed without the cyclic collector."""

from __future__ import annotations

import gc
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from ductwork.contract import paths
from ductwork.contract.encoding import quote_sku
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from serve.one_write import COPY_LIMIT_BYTES, WHOLE_ANSWER, HeadHoldingTransport, hold_head
from serve.request_heads import BoundedHttpToolsProtocol
from tests.conftest import home_with_published_snapshot
from tests.helpers.cli import free_ports
from tests.helpers.raw_http import address_of, request_bytes, send_and_read
from tests.helpers.serve_process import RunningApi, serving_process

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"
ANSWER_LIMIT_S = 30.0


class RecordingTransport:
    """The calls a transport received, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.calls.append(("write", bytes(data)))

    def writelines(self, parts: tuple[bytes, ...]) -> None:
        self.calls.append(("writelines", b"".join(parts)))

    def close(self) -> None:
        self.calls.append(("close", b""))

    def is_closing(self) -> bool:
        return False


def test_a_head_and_its_body_go_out_in_one_write() -> None:
    sent = RecordingTransport()
    held = HeadHoldingTransport(sent)  # type: ignore[arg-type]
    held.write(HEAD)
    assert sent.calls == []
    held.write(b"hello")
    assert sent.calls == [("write", HEAD + b"hello")]


def test_a_large_body_is_written_beside_its_head_and_later_chunks_pass_through() -> None:
    sent = RecordingTransport()
    held = HeadHoldingTransport(sent)  # type: ignore[arg-type]
    body = b"HTTP/" + b"x" * COPY_LIMIT_BYTES  # a body that starts like a head is not held
    held.write(HEAD)
    held.write(body)
    held.write(b"HTTP/1.1 more")
    assert sent.calls == [("writelines", HEAD + body), ("write", b"HTTP/1.1 more")]


def test_an_interim_100_continue_goes_out_at_once_and_the_head_after_it_is_held() -> None:
    sent = RecordingTransport()
    held = HeadHoldingTransport(sent)  # type: ignore[arg-type]
    held.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert sent.calls == [("write", b"HTTP/1.1 100 Continue\r\n\r\n")]
    held.write(HEAD)
    held.write(b"")
    assert sent.calls[1] == ("write", HEAD)


def test_an_answer_without_a_body_is_sent_when_its_response_completes() -> None:
    sent = RecordingTransport()
    completed: list[bool] = []
    cycle = SimpleNamespace(transport=sent, on_response=lambda: completed.append(True), scope={})
    hold_head(cycle, sent)  # type: ignore[arg-type]
    cycle.transport.write(HEAD)  # a HEAD request's answer: uvicorn writes no body
    assert sent.calls == []
    cycle.on_response()
    assert sent.calls == [("write", HEAD)] and completed == [True]


def test_closing_sends_the_held_head_first() -> None:
    sent = RecordingTransport()
    held = HeadHoldingTransport(sent)  # type: ignore[arg-type]
    held.write(HEAD)
    held.close()
    assert sent.calls == [("write", HEAD), ("close", b"")]


@pytest.fixture(scope="module")
def served(
    synced_home: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningApi, str]]:
    home = tmp_path_factory.mktemp("one-write")
    home_with_published_snapshot(synced_home, home)
    key = KeyFile(HomeSettings(home=home).keys_path).create("one-write", ["all"])
    with serving_process(home, 2) as api:
        yield api, key


def read_answers(
    sock: socket.socket, methods: list[str]
) -> list[tuple[int, dict[str, str], bytes]]:
    """One whole answer off ``sock`` per request method sent: status, headers and the body its
    content-length announces (none for a HEAD, a 304 or a 204)."""
    buffer = b""
    answers = []
    for method in methods:
        while b"\r\n\r\n" not in buffer:
            chunk = sock.recv(65536)
            assert chunk, f"the connection closed after {len(answers)} answers"
            buffer += chunk
        head, buffer = buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
        status = int(lines[0][9:12])
        bodiless = method == "HEAD" or status in (204, 304)
        length = 0 if bodiless else int(headers.get("content-length", "0"))
        while len(buffer) < length:
            chunk = sock.recv(65536)
            assert chunk, "the connection closed inside a body"
            buffer += chunk
        answers.append((status, headers, buffer[:length]))
        buffer = buffer[length:]
    assert buffer == b"", "bytes after the last answer"
    return answers


def test_pipelined_answers_with_and_without_bodies_arrive_whole_and_in_order(
    served: tuple[RunningApi, str],
) -> None:
    api, key = served
    auth = {"Authorization": f"Bearer {key}"}
    found = f"{paths.PRODUCTS_LIST}?count=1"
    missing = f"{paths.UNITS_RESOLVER}/{quote_sku('NO-SUCH-SKU-ANYWHERE')}"
    with socket.create_connection(address_of(api.url), timeout=ANSWER_LIMIT_S) as sock:
        sock.sendall(request_bytes(api.url, found, auth))
        [(status, headers, body)] = read_answers(sock, ["GET"])
        assert status == 200 and body
        head_request = request_bytes(api.url, "/healthz", {}).replace(b"GET ", b"HEAD ", 1)
        sock.sendall(
            request_bytes(api.url, found, {**auth, "If-None-Match": headers["etag"]})
            + request_bytes(api.url, missing, auth)
            + head_request
            + request_bytes(api.url, found, auth)
        )
        answers = read_answers(sock, ["GET", "GET", "HEAD", "GET"])
    assert [answer[0] for answer in answers[:2]] == [304, 404]
    assert answers[1][2] and answers[2][2] == b""  # the 404's body; the HEAD's none
    assert answers[3] == (200, answers[3][1], body)  # the last one whole, after the HEAD


ANSWER_HEADERS = [(b"etag", b'"e1"'), (b"content-length", b"5"), (b"content-type", b"text/plain")]


async def whole_or_sent(scope: dict, receive: object, send: object) -> None:
    """``/whole``: the answer through the whole-answer extension (or, refused, another body);
    ``/sent``: the same answer through ``send``; ``/refused``: the extension asked to send a
    header value holding a line break, and the body tells whether it did."""
    whole = scope["extensions"][WHOLE_ANSWER]
    headers, body = list(ANSWER_HEADERS), b"hello"
    if scope["path"] == "/whole":
        if whole(200, headers, body):
            return
        body = b"nope!"  # refused: the comparison with ``/sent`` fails
    if scope["path"] == "/refused":
        body = b"sent!" if whole(200, [*headers, (b"x-bad", b"a\r\nb: c")], body) else b"no, 5"
    await send({"type": "http.response.start", "status": 200, "headers": headers})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": body})  # type: ignore[operator]


@pytest.fixture(scope="module")
def bounded_server() -> Iterator[str]:
    """uvicorn with ``ductwork serve``'s protocol, in a thread, around ``whole_or_sent``."""
    [port] = free_ports(1)
    config = uvicorn.Config(
        whole_or_sent, host="127.0.0.1", port=port, http=BoundedHttpToolsProtocol,
        loop="uvloop", lifespan="off", log_level="warning",
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(600):
            if server.started:
                break
            thread.join(0.05)
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(ANSWER_LIMIT_S)


def without_date(answer: bytes) -> bytes:
    return b"\r\n".join(x for x in answer.split(b"\r\n") if not x.startswith(b"date: "))


def test_a_whole_answer_goes_out_byte_for_byte_as_uvicorns_send_writes_it(
    bounded_server: str,
) -> None:
    with socket.create_connection(address_of(bounded_server), timeout=ANSWER_LIMIT_S) as sock:
        answers = []
        for target in ("/whole", "/sent", "/whole"):
            sock.sendall(request_bytes(bounded_server, target, {}))
            received = b""
            while not received.endswith(b"hello"):
                chunk = sock.recv(65536)
                assert chunk, "the connection closed"
                received += chunk
            answers.append(without_date(received))
    assert answers[0] == answers[1] == answers[2]
    assert answers[0].startswith(b"HTTP/1.1 200 OK\r\nserver: uvicorn\r\netag: ")


def test_a_whole_answer_to_connection_close_says_so_and_closes_as_send_does(
    bounded_server: str,
) -> None:
    closing = {"Connection": "close"}
    whole = send_and_read(bounded_server, request_bytes(bounded_server, "/whole", closing), 30)
    sent = send_and_read(bounded_server, request_bytes(bounded_server, "/sent", closing), 30)
    assert b"connection: close\r\n" in whole
    assert without_date(whole) == without_date(sent)


def test_a_header_value_with_a_line_break_is_left_to_send_which_refuses_it(
    bounded_server: str,
) -> None:
    answer = send_and_read(
        bounded_server, request_bytes(bounded_server, "/refused", {"Connection": "close"}), 30
    )
    assert answer.endswith(b"no, 5") and b"x-bad" not in answer


def test_an_answered_request_leaves_no_reference_cycle_for_the_collector(
    bounded_server: str,
) -> None:
    """Each request's cycle is freed by reference counting once answered, whichever way it was
    sent: with the cyclic collector off, none of 40 answered requests' cycles stays behind
    (at most the one its connection still holds)."""
    marker = b"cycle-check"
    gc.collect()
    gc.disable()
    try:
        with socket.create_connection(address_of(bounded_server), timeout=ANSWER_LIMIT_S) as sock:
            for target in ("/whole", "/sent") * 20:
                sock.sendall(request_bytes(bounded_server, f"{target}?{marker.decode()}", {}))
                received = b""
                while not received.endswith(b"hello"):
                    chunk = sock.recv(65536)
                    assert chunk, "the connection closed"
                    received += chunk
            left = [
                found
                for found in gc.get_objects()
                if isinstance(found, RequestResponseCycle)
                and found.scope.get("query_string") == marker
            ]
    finally:
        gc.enable()
    assert len(left) <= 1, f"{len(left)} answered requests' cycles wait for the collector"
