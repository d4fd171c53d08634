"""Fresh request ids: 32 hex digits, distinct within a process and across forked workers."""

from __future__ import annotations

import os

from serve.observability import request_ids


def test_fresh_request_ids_are_32_hex_digits_and_never_repeat_in_a_process() -> None:
    ids = [request_ids.next() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 and i == i.lower() for i in ids)


def test_a_forked_worker_draws_its_own_random_half() -> None:
    parent = request_ids.next()
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the child: report one id and leave without running any cleanup
        os.write(write_end, request_ids.next().encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        forked = pipe.read().decode()
    os.waitpid(child, 0)
    assert len(forked) == 32
    assert forked[:16] != parent[:16]
