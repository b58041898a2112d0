"""Every place the code reads MySQL and MariaDB differently, each branch
tested here, on each server: the suite runs on MySQL 9.7 and MariaDB 10.11
(docs/databases.md, "Which MySQL and MariaDB were tested"); a branch for the
other server's answers is tested on the values that server gives."""

import pytest
from django.db import OperationalError, connection

from django_dbqueue.admin.paginator import estimate_query_rows, explained_rows
from django_dbqueue.checks import binlog_warning
from django_dbqueue.clock import read_database_now
from django_dbqueue.db import MYSQL_DISCONNECTS, is_conflict, is_outage
from django_dbqueue.models import Job
from django_dbqueue.worker.housekeeping.rescuer import server_uptime
from tests.conftest import DATABASE, MYSQL_FAMILY

needs_mysql_protocol = pytest.mark.skipif(
    DATABASE not in MYSQL_FAMILY,
    reason="runs its SQL on MySQL or MariaDB (DBQUEUE_DATABASE=mysql or mariadb)",
)


@pytest.mark.parametrize(
    ("first", "rows"),
    [
        ({"rows": 1200, "filtered": 10.0}, 120),  # MySQL: numbers
        ({"rows": "1200", "filtered": "10.00"}, 120),  # MariaDB: text
        ({"rows": "1200", "filtered": None}, 1200),  # MariaDB without filtered
        ({"rows": None}, 0),
    ],
)
def test_explain_rows_as_mysql_and_mariadb_give_them(first, rows):
    assert explained_rows(first) == rows


@needs_mysql_protocol
@pytest.mark.django_db
def test_the_admins_row_estimate_reads_a_table_explain_whatever_the_sessions_format():
    """MySQL 9's explain_format is TREE: a plain EXPLAIN answers one text
    column, and the estimate read 0 rows. MariaDB has no such variable."""
    Job.objects.bulk_create([Job(task_path="demo.tasks.noop") for _ in range(30)])
    with connection.cursor() as cursor:
        if not connection.mysql_is_mariadb:
            cursor.execute("SET SESSION explain_format = TREE")
    assert estimate_query_rows(Job.objects.filter(queue_name="default")) >= 1


@pytest.mark.parametrize(
    ("code", "server"),
    [(4031, "MySQL 8.0.24+: disconnected for inactivity"), (1927, "MariaDB: connection killed")],
)
def test_each_servers_own_disconnect_code_is_an_outage(code, server):
    assert code in MYSQL_DISCONNECTS, server
    assert is_outage(OperationalError(code, server), "default")


@pytest.mark.parametrize(
    ("code", "server"),
    [
        (1213, "MariaDB Galera: certification failure, or aborted by another node's write"),
        (3101, "MySQL Group Replication: certification failure at commit"),
        # Its local transaction aborted by another member's certified write
        # (on the real group: tests/test_cluster_group_replication.py).
        (1180, "Got error 149 - 'Lock deadlock; Retry transaction' during COMMIT"),
    ],
)
def test_each_clusters_certification_failure_is_a_conflict_to_retry_not_an_outage(code, server):
    # Galera's on a real cluster: tests/test_cluster_multiwriter.py.
    assert is_conflict(OperationalError(code, server))
    assert not is_outage(OperationalError(code, server), "default")


@pytest.mark.parametrize(
    ("code", "server"),
    [
        (1047, "MariaDB Galera: WSREP has not yet prepared node for application use"),
        (1180, "MariaDB Galera: a commit outside the primary component"),
        (1290, "MySQL and MariaDB: read-only, as a writer demoted by a switchover is"),
    ],
)
def test_a_server_that_takes_no_writes_for_now_is_an_outage(code, server):
    # 1047 and 1290 on a real cluster: tests/test_cluster_failover.py.
    assert is_outage(OperationalError(code, server), "default")


def test_binlog_defaults_mysql_row_is_quiet_and_mariadb_mixed_warns():
    assert binlog_warning("default", 1, "ROW") is None  # MySQL 8's default
    assert binlog_warning("default", 1, "MIXED").id == "django_dbqueue.W002"  # MariaDB's


@needs_mysql_protocol
@pytest.mark.django_db
def test_uptime_is_read_with_show_which_mysql_8_still_has():
    # MySQL 8 has no information_schema.GLOBAL_STATUS; both servers answer SHOW.
    assert connection.vendor == "mysql"
    uptime = server_uptime("default")
    assert uptime is not None and uptime > 0


@needs_mysql_protocol
@pytest.mark.django_db
def test_the_database_clock_reads_utc_timestamp_with_microseconds():
    now = read_database_now("default")
    assert now.tzinfo is not None
