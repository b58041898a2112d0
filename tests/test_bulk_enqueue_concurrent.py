"""bulk_enqueue's ids under concurrent producers: each returned id's row
holds that call's arguments, however the INSERTs' ids interleave (MySQL
reads them back by a token per chunk, the others by RETURNING)."""

import pytest
from django.db import connection

from demo.tasks import add
from django_dbqueue import bulk_enqueue
from django_dbqueue.models import Job
from tests.conftest import DATABASE, MYSQL_FAMILY, needs_row_locks
from tests.threads import together

pytestmark = pytest.mark.django_db(transaction=True)

BULKS, CALLS, CHUNK = 3, 2500, 1000  # each bulk three chunks, the last short
SINGLES = 300


def produce_together(bulks: int, calls: int, batch_size: int) -> tuple[list[list[int]], list[int]]:
    """``bulks`` threads, each with its own connection, each bulk-enqueuing
    add(bulk, i) for i below ``calls``, beside one thread enqueuing
    add(-1, i) one by one so that single INSERTs take ids between the
    bulks' too; all start together. The ids each returned, in call order."""

    def producer(index: int) -> list[int]:
        if index < bulks:
            results = bulk_enqueue(add, [((index, i), {}) for i in range(calls)], batch_size=batch_size)
        else:
            results = [add.enqueue(-1, i) for i in range(SINGLES)]
        return [int(result.id) for result in results]

    ids = together(producer, bulks + 1)
    return ids[:bulks], ids[bulks]


@needs_row_locks
def test_concurrent_bulks_each_get_the_ids_of_their_own_rows_in_call_order():
    bulks, singles = produce_together(BULKS, CALLS, CHUNK)
    args = dict(Job.objects.values_list("pk", "args"))
    assert len(args) == BULKS * CALLS + SINGLES
    for index, ids in enumerate(bulks):
        assert [args[pk] for pk in ids] == [[index, i] for i in range(CALLS)], f"bulk {index}"
        assert ids == sorted(ids), "a bulk's ids increase in call order"
    assert [args[pk] for pk in singles] == [[-1, i] for i in range(SINGLES)]
    assert len({pk for ids in [*bulks, singles] for pk in ids}) == len(args)


@pytest.mark.skipif(DATABASE not in MYSQL_FAMILY, reason="auto_increment_increment is MySQL's and MariaDB's")
def test_ids_that_are_not_consecutive_still_map_to_their_calls():
    """The first id plus k is not relied on: with ids three apart (as a
    cluster's auto_increment_increment makes them) every call still gets
    its own row's id."""
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION auto_increment_increment = 3")
    try:
        results = bulk_enqueue(add, [((i, 0), {}) for i in range(7)], batch_size=4)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION auto_increment_increment = 1")
    ids = [int(result.id) for result in results]
    assert {b - a for a, b in zip(ids, ids[1:], strict=False)} == {3}
    args = dict(Job.objects.values_list("pk", "args"))
    assert [args[pk] for pk in ids] == [[i, 0] for i in range(7)]
