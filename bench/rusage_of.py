"""Run a command; write its wall time, peak RSS and CPU time to a JSON file.

    python -I bench/rusage_of.py REPORT.json COMMAND [ARG ...]

The suite measures each child through this small process rather than forking the child from
itself: Linux carries a process's RSS high-water mark across ``exec``, so a child forked from
the suite (hundreds of MiB by the serving part) reports at least the suite's own peak. Forked
from here, the child starts from this process's few MiB. The figures come from ``wait4``: the
child's peak RSS is the largest of it and the descendants it waited for, its CPU time theirs
summed. The exit code is the child's.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    report, command = sys.argv[1], sys.argv[2:]
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)  # exec failed; the suite reports the exit code
    _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - started
    with open(report, "w", encoding="utf-8") as out:
        json.dump(
            {
                "seconds": seconds,
                "peak_rss": usage.ru_maxrss * 1024,
                "cpu_s": usage.ru_utime + usage.ru_stime,
            },
            out,
        )
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
