"""Handing decoded data from a producer thread to its consumer through a bounded queue, with a
stop signal: the producer never blocks for good on a full queue, and stopping it never leaves a
thread behind (the reader's prefetch thread, the Parquet row-group threads)."""
from __future__ import annotations

import queue
import threading


def put_unless_stopped(q: queue.Queue, item, stop: threading.Event) -> bool:
    """Put ``item`` into ``q``, waiting while it is full; False (not put) once ``stop`` is set."""
    while not stop.is_set():
        try:
            q.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def join_draining(thread: threading.Thread | None, q: queue.Queue | None) -> None:
    """Wait for a producer ``thread`` whose stop signal is set, emptying ``q`` so that a put it
    is blocked in returns."""
    if thread is None or q is None:
        return
    while thread.is_alive():
        try:
            q.get_nowait()
        except queue.Empty:
            pass
        thread.join(timeout=0.05)
