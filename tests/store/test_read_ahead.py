"""sql_common.read_ahead: rows made on a thread of their own, ahead of the reader."""

import gc
import threading
import time

import pytest

from torchport.kb.sql_common import AHEAD_CHUNKS, read_ahead


def _ahead_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "torchport-read-ahead"}


@pytest.fixture
def threads_ended():
    """``threads_ended()``: whether every read-ahead thread this test started has ended
    (waiting up to 10 s); those of earlier tests (a reader not yet collected) are not its."""
    before = _ahead_threads()

    def ended(deadline_s: float = 10.0) -> bool:
        end = time.monotonic() + deadline_s
        while _ahead_threads() - before and time.monotonic() < end:
            time.sleep(0.01)
        return not _ahead_threads() - before

    return ended


def test_every_row_arrives_in_order(threads_ended):
    chunks = [[(i, j) for j in range(3)] for i in range(50)]
    assert list(read_ahead(lambda: iter(chunks))) == [row for chunk in chunks for row in chunk]
    assert threads_ended()


def test_the_producer_starts_before_the_first_row_is_asked_for():
    started = threading.Event()

    def chunks():
        started.set()
        yield [1]

    reader = read_ahead(chunks)
    assert started.wait(5)  # the database works while the caller does something else
    assert list(reader) == [1]


def test_an_error_on_the_producers_thread_reaches_the_reader_after_the_rows_before_it(
    threads_ended,
):
    def chunks():
        yield [1, 2]
        raise ValueError("the database said no")

    reader = read_ahead(chunks)
    assert next(reader) == 1 and next(reader) == 2
    with pytest.raises(ValueError, match="the database said no"):
        next(reader)
    assert threads_ended()


@pytest.mark.parametrize("how", ["stops early", "never reads"])
def test_a_reader_that_stops_or_never_reads_ends_the_producer_and_its_clean_up(how, threads_ended):
    closed = threading.Event()
    made = []

    def chunks():
        try:
            for i in range(10_000):  # far more than the queue holds
                made.append(i)
                yield [i]
        finally:
            closed.set()  # a real producer closes its connection here

    reader = read_ahead(chunks)
    if how == "stops early":
        assert next(reader) == 0
        reader.close()
    else:
        del reader
        gc.collect()
    assert closed.wait(5) and threads_ended()
    assert len(made) <= AHEAD_CHUNKS + 3  # it waited for the reader, never ran ahead unbounded
