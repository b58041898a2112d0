"""Rate limits: at most N jobs of a key claimed in any window of the period,
on every database, with one process (the processes' test:
test_rate_limits_processes.py)."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.test import override_settings

from demo.tasks import add, per_customer, rated
from django_dbqueue import bulk_enqueue, task
from django_dbqueue.clock import DbNow, read_database_now
from django_dbqueue.exceptions import OptionsError
from django_dbqueue.models import Job, RateSlot
from django_dbqueue.options import QueueOptions
from django_dbqueue.rates import Rate, parse_rate
from django_dbqueue.tasks_api import InvalidTask
from django_dbqueue.transitions.rated import RateClaims
from django_dbqueue.worker.process.claims import Claims
from tests.rows import inserted


def jobs(n: int, key: str = "k", limit: str = "2/m", queue: str = "default") -> list[Job]:
    return inserted(
        [Job(task_path="demo.tasks.noop", rate_key=key, rate_limit=limit, queue_name=queue) for _ in range(n)]
    )


def db_now():
    return Job.objects.annotate(now=DbNow()).values_list("now", flat=True).first()


def claim_all(owner: str, key: str = "k", limit: str | None = None) -> tuple[list[Job], float | None]:
    """Claims of the key until one comes back empty: all the window allows now."""
    claimed: list[Job] = []
    while True:
        batch, wait = Job.objects.claim_rated(owner, ["default"], key, room=100, limit=limit)
        if not batch:
            return claimed, wait
        claimed += batch


def age_slots(key: str, seconds: float) -> None:
    """Move the key's slots into the past, as the period passing would."""
    for slot in RateSlot.objects.filter(key=key):
        slot.free_at -= timedelta(seconds=seconds)
        slot.save(update_fields=["free_at"])


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("100/m", (100, 60)),
        ("5/s", (5, 1)),
        ("1000/h", (1000, 3600)),
        ("1/d", (1, 86400)),
        ("30/5m", (30, 300)),
    ],
)
def test_a_rate_reads_as_a_count_per_period_of_seconds(text, rate):
    assert parse_rate(text) == Rate(*rate)


@pytest.mark.parametrize("text", ["100/minute", "0/m", "-1/m", "100", "1.5/s", "10/0m", " 1/s", 100, None])
def test_a_rate_in_any_other_form_is_refused_with_the_forms_it_takes(text):
    with pytest.raises(ValueError, match=r"rate_limit must be a count of at least 1 .* such as '100/m'"):
        parse_rate(text)


def test_a_period_longer_than_a_leap_year_is_refused_with_the_longest_one_named():
    assert parse_rate("1/366d") == Rate(1, 366 * 86400)
    message = (
        "rate_limit '1/4000000d' has a period of 345,600,000,000 seconds; a period is at most 366 days "
        "('1/366d'), as a slot is next free a period after its claim and the database holds no time "
        "past the year 9999."
    )
    with pytest.raises(ValueError) as caught:
        parse_rate("1/4000000d")
    assert str(caught.value) == message
    for text in ("1/367d", "1/8785h", "1/9999999999999d"):
        with pytest.raises(ValueError, match="a period is at most 366 days"):
            parse_rate(text)


@pytest.mark.django_db
def test_a_period_past_the_year_9999_is_refused_at_every_entry():
    def f(customer: str) -> None: ...

    with pytest.raises(InvalidTask, match=r"rate_limit '1/4000000d' has a period of .* at most 366 days"):
        task(rate_limit="1/4000000d")(f)
    with pytest.raises(InvalidTask, match="at most 366 days"):
        add.using(rate_limit="1/4000000d").enqueue(1, 2)
    with pytest.raises(InvalidTask, match="at most 366 days"):
        bulk_enqueue(add.using(rate_limit="1/4000000d"), [((1, 2), {})])
    assert not Job.objects.exists()
    with pytest.raises(OptionsError) as caught:
        QueueOptions.parse({"RATE_LIMITS": {"queue:email": "1/4000000d"}})
    assert caught.value.problems == [
        "OPTIONS RATE_LIMITS['queue:email'] '1/4000000d' has a period of 345,600,000,000 seconds; a "
        "period is at most 366 days ('1/366d'), as a slot is next free a period after its claim and the "
        "database holds no time past the year 9999."
    ]


def test_bad_task_options_are_refused_at_definition():
    def f(customer: str) -> None: ...

    with pytest.raises(InvalidTask, match="not '100/minute'"):
        task(rate_limit="100/minute")(f)
    with pytest.raises(InvalidTask, match="not '0/m'"):
        task(rate_limit="0/m")(f)
    with pytest.raises(InvalidTask, match="rate_key needs a rate_limit"):
        task(rate_key="k")(f)
    with pytest.raises(InvalidTask, match="rate_key must be a non-empty string of at most 191 characters"):
        task(rate_limit="1/s", rate_key="k" * 192)(f)
    rated.using(rate_key="k" * 191)  # the longest
    with pytest.raises(InvalidTask, match="cannot have both a concurrency_key and a rate_limit"):
        task(rate_limit="1/s", concurrency_key="k", concurrency_limit=1)(f)
    with pytest.raises(InvalidTask, match="cannot have both a rate_limit and a fairness_key"):
        task(rate_limit="1/s", fairness_key="tenant")(f)
    with pytest.raises(InvalidTask, match="cannot have both a rate_limit and a fairness_key"):
        rated.using(fairness_key="tenant")


def test_bad_rate_limits_in_options_are_each_named():
    with pytest.raises(OptionsError) as caught:
        QueueOptions.parse({"RATE_LIMITS": {"queue:email": "100/minute", "": "1/s"}})
    [problem] = caught.value.problems
    assert "OPTIONS RATE_LIMITS['queue:email'] must be a count" in problem
    assert "OPTIONS RATE_LIMITS has the key ''" in problem
    assert QueueOptions.parse({"RATE_LIMITS": {"queue:email": "100/m"}}).RATE_LIMITS == {
        "queue:email": "100/m"
    }


@pytest.mark.django_db
def test_enqueue_stores_the_key_and_limit_per_call_also_in_bulk():
    one = rated.enqueue("acme", 1)
    many = bulk_enqueue(rated, [(("acme", 2), {}), (("globex", 3), {})])
    rows = Job.objects.in_bulk([int(r.id) for r in [one, *many]])
    assert [(rows[int(r.id)].rate_key, rows[int(r.id)].rate_limit) for r in [one, *many]] == [
        ("customer:acme", "60/m"),
        ("customer:acme", "60/m"),
        ("customer:globex", "60/m"),
    ]
    whole = Job.objects.get(pk=add.using(rate_limit="5/s").enqueue(1, 2).id)
    assert (whole.rate_key, whole.rate_limit) == ("task:demo.tasks.add", "5/s"), "the task as a whole"
    with pytest.raises(InvalidTask, match="returned ''"):
        rated.using(rate_key=lambda customer, index: "").enqueue("x", 1)


@pytest.mark.django_db
def test_a_queue_limited_in_options_gives_its_jobs_the_queue_key():
    tasks = {
        "default": {
            "BACKEND": "django_dbqueue.backend.DatabaseBackend",
            "QUEUES": ["default", "email"],
            "OPTIONS": {"RATE_LIMITS": {"queue:default": "10/s"}},
        }
    }
    with override_settings(TASKS=tasks):
        job = Job.objects.get(pk=add.enqueue(1, 2).id)
        [bulk] = bulk_enqueue(add, [((3, 4), {})])
        own = Job.objects.get(pk=rated.enqueue("acme", 1).id)
        limited = Job.objects.get(pk=per_customer.enqueue("acme", 1, 0).id)
    assert (job.rate_key, job.rate_limit) == ("queue:default", "10/s")
    assert (limited.concurrency_key, limited.rate_key) == ("customer:acme", None), "one limit per job"
    assert Job.objects.get(pk=bulk.id).rate_key == "queue:default"
    assert own.rate_key == "customer:acme", "a task's own limit wins"


@pytest.mark.django_db
def test_the_ordinary_claim_leaves_rate_limited_jobs_alone():
    jobs(3)
    plain = inserted([Job(task_path="demo.tasks.noop")])[0]
    assert [job.pk for job in Job.objects.claim("w", limit=10)] == [plain.pk]


@pytest.mark.django_db
def test_a_job_over_the_rate_waits_ready_without_spending_an_attempt_until_a_slot_frees():
    made = jobs(4, limit="2/m")
    first, wait = claim_all("a")
    assert [j.pk for j in first] == [made[0].pk, made[1].pk], "two slots: two claims, in claim order"
    assert {j.status for j in first} == {"RUNNING"}
    assert 59 < wait <= 60, "the next slot frees a period after the claim"
    left = Job.objects.filter(pk__in=[made[2].pk, made[3].pk])
    assert set(left.values_list("status", "attempts", "owner")) == {("READY", 0, None)}

    # Finishing a job frees nothing: the window counts claims, not running jobs.
    Job.objects.filter(pk=first[0].pk).update(status="SUCCESSFUL")
    assert Job.objects.claim_rated("b", ["default"], "k", room=10)[0] == []
    age_slots("k", 60)
    assert [j.pk for j in claim_all("b")[0]] == [made[2].pk, made[3].pk]
    assert Job.objects.claim_rated("b", ["default"], "k", room=10) == ([], None), "nothing left"


@pytest.mark.django_db
def test_each_key_has_its_own_slots_and_keys_compare_byte_for_byte():
    jobs(2, key="X", limit="1/h")
    jobs(2, key="x", limit="1/h")
    assert len(Job.objects.claim_rated("a", ["default"], "X", room=5)[0]) == 1
    assert len(Job.objects.claim_rated("a", ["default"], "x", room=5)[0]) == 1
    assert Job.objects.claim_rated("a", ["default"], "x", room=5)[0] == []
    assert sorted(RateSlot.objects.values_list("key", "slot")) == [("X", 0), ("x", 0)]


@pytest.mark.django_db
def test_a_limit_changed_takes_effect_lowered_or_raised():
    jobs(10, limit="3/m")
    assert len(claim_all("a")[0]) == 3
    age_slots("k", 60)
    # OPTIONS RATE_LIMITS wins over the rows: slots past a lowered N are not used.
    assert len(claim_all("a", limit="1/m")[0]) == 1
    # Jobs enqueued after the code changed carry the new limit, and lead the claim.
    Job.objects.filter(rate_key="k", status="READY").update(rate_limit="5/m", priority=1)
    assert len(claim_all("a")[0]) == 4, "slot 0 is still busy"
    assert RateSlot.objects.filter(key="k").count() == 5


@pytest.mark.django_db
def test_an_unreadable_limit_written_by_sql_falls_back_to_one_a_second():
    jobs(3, limit="lots")
    assert len(Job.objects.claim_rated("a", ["default"], "k", room=10)[0]) == 1
    batch, wait = Job.objects.claim_rated("a", ["default"], "k", room=10)
    assert batch == [] and 0 < wait <= 1


@pytest.mark.django_db
def test_a_period_past_the_longest_written_by_sql_counts_as_the_longest():
    """The claim once moved the slot 4,000,000 days on: OverflowError, and
    every worker of the queue died at each claim."""
    jobs(2, limit="1/4000000d")
    [claimed], _ = Job.objects.claim_rated("a", ["default"], "k", room=10)
    free_at = RateSlot.objects.get(key="k").free_at
    assert timedelta(days=365) < free_at - db_now() <= timedelta(days=366)
    assert Job.objects.claim_rated("a", ["default"], "k", room=10)[0] == []


@pytest.mark.django_db
def test_a_worker_skips_a_busy_key_without_a_query_until_its_slot_frees(django_assert_num_queries):
    jobs(5, key="busy", limit="1/h")
    jobs(3, key="free", limit="100/m")
    rates = RateClaims()
    first = rates.claim_rated_jobs(Job.objects.all(), ["default"], "w", room=10, lease=60)
    assert sorted(job.rate_key for job in first) == ["busy", "free", "free", "free"]
    assert rates.claim_rated_jobs(Job.objects.all(), ["default"], "w", room=10, lease=60) == []
    assert rates.keys == ["busy"], "a key with nothing due is dropped"
    with django_assert_num_queries(0):
        assert rates.claim_rated_jobs(Job.objects.all(), ["default"], "w", room=10, lease=60) == []
    assert 3500 < rates.wait() <= 3600
    ready = Job.objects.filter(rate_key="busy", status="READY")
    assert set(ready.values_list("attempts", flat=True)) == {0} and ready.count() == 4


@pytest.mark.django_db
def test_options_limits_win_in_the_worker():
    jobs(5, key="k", limit="100/m")
    rates = RateClaims({"k": "2/m"})
    claimed = [
        rates.claim_rated_jobs(Job.objects.all(), ["default"], "w", room=10, lease=60) for _ in range(3)
    ]
    assert [len(batch) for batch in claimed] == [1, 1, 0]


@pytest.mark.django_db
def test_a_row_written_by_sql_is_paced_by_its_queues_limit_only_with_the_queue_key():
    """docs/sql-contract.md: OPTIONS RATE_LIMITS gives the queue's key at
    enqueue(); a plain INSERT must write it (its limit then comes from
    RATE_LIMITS), or the row is an ordinary job, claimed at once."""
    # run_after given, as an SQL producer on SQLite must with USE_TZ = False
    # in another zone (SQLite's default times are UTC: docs/databases.md).
    now = read_database_now("default")
    with connection.cursor() as cursor:
        for rate_key in ["queue:email", "queue:email", None, None]:
            cursor.execute(
                "INSERT INTO django_dbqueue_job (task_path, queue_name, rate_key, run_after) "
                "VALUES (%s, %s, %s, %s)",
                ["demo.tasks.noop", "email", rate_key, now],
            )
    claims = Claims(
        "default",
        "w",
        ["email"],
        size=10,
        lease=60,
        poll_max=1,
        release=lambda ids: Job.objects.release("w", ids),
        rate_limits={"queue:email": "1/h"},
    )
    batch, _ = claims.claim_batch()
    assert sorted((job.rate_key or "") for job in batch) == ["", "", "queue:email"]
    left = Job.objects.filter(status="READY")
    assert list(left.values_list("rate_key", "rate_limit")) == [("queue:email", None)], "its hour is not up"


@pytest.mark.django_db
def test_a_claim_takes_a_tenth_of_a_keys_slots_so_its_window_is_spread_over_claims():
    jobs(30, limit="20/m")
    sizes = []
    while batch := Job.objects.claim_rated("w", ["default"], "k", room=100)[0]:
        sizes.append(len(batch))
    assert sizes == [2] * 10, "all 20 slots used, two at a time"


@pytest.mark.django_db
def test_a_claim_writes_only_the_slots_it_uses_whatever_the_limit():
    """A key of 100000/d made its 100,000 slot rows in its first claim
    (300,000 rows, 21 s, for three keys); now a claim makes only the slots
    it takes, and pruned ones are made again below the limit."""
    jobs(30, limit="100000/d")
    batch, _ = Job.objects.claim_rated("w", ["default"], "k", room=7)
    assert len(batch) == 7
    # The seven it took, and one more left free: a worker's look sees the key is not at its limit.
    assert sorted(RateSlot.objects.filter(key="k").values_list("slot", flat=True)) == list(range(8))
    assert Job.objects.busy_rate_keys(["k"]) == {}
    assert len(Job.objects.claim_rated("w", ["default"], "k", room=5)[0]) == 5
    assert RateSlot.objects.filter(key="k").count() == 13
    # Every number of a key of 4 made, and two pruned while idle: the claim fills the gaps.
    jobs(10, key="small", limit="4/m")
    assert len(claim_all("w", key="small")[0]) == 4
    RateSlot.objects.filter(key="small", slot__in=[1, 2]).delete()
    assert len(claim_all("w", key="small")[0]) == 2, "the two made again, no more than the limit"
    assert sorted(RateSlot.objects.filter(key="small").values_list("slot", flat=True)) == [0, 1, 2, 3]


@pytest.mark.django_db
def test_a_new_worker_learns_every_busy_key_in_one_read_without_a_claim(django_assert_num_queries):
    for key in ("a", "b", "c"):
        jobs(2, key=key, limit="1/h")
        assert len(Job.objects.claim_rated("old", ["default"], key, room=5)[0]) == 1
    rates = RateClaims()
    # The keys with due jobs, their slots, the database's now (SQLite's is this host's): no claim.
    with django_assert_num_queries(2 if connection.vendor == "sqlite" else 3):
        assert rates.claim_rated_jobs(Job.objects.all(), ["default"], "new", room=10, lease=60) == []
    assert sorted(rates.busy) == ["a", "b", "c"]
    assert 0 < rates.wait() <= RateClaims.LEARNED_FOR


@pytest.mark.django_db
def test_bad_options_for_one_call_are_refused_at_enqueue_and_write_nothing():
    with pytest.raises(InvalidTask, match="not '100/minute'"):
        add.using(rate_limit="100/minute").enqueue(1, 2)
    with pytest.raises(InvalidTask, match="rate_key must be a non-empty string of at most 191"):
        add.using(rate_limit="1/s", rate_key="k" * 256).enqueue(1, 2)
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_slots_idle_for_an_hour_are_pruned_and_the_limit_still_holds():
    from django_dbqueue.transitions.pruning import delete_idle_slots

    made = jobs(6, key="old", limit="2/m")
    jobs(1, key="busy", limit="1/h")
    assert len(claim_all("a", key="old")[0]) == 2
    assert len(claim_all("a", key="busy")[0]) == 1
    assert delete_idle_slots("default") == 0, "slots in use, and slots free for less than an hour, stay"
    age_slots("old", 2 * 3600 + 60)  # used two hours ago: free for more than an hour
    assert delete_idle_slots("default") == 2
    assert list(RateSlot.objects.values_list("key", flat=True)) == ["busy"]
    # Absent is free: the next claim makes the key's slots again, and takes no more than the limit.
    again = claim_all("b", key="old")[0]
    assert [j.pk for j in again] == [made[2].pk, made[3].pk]
    assert RateSlot.objects.filter(key="old").count() == 2


@pytest.mark.django_db
def test_a_workers_looks_go_round_every_key_however_many_keys_have_due_jobs():
    keys = [f"customer:{n:03}" for n in range(100)]
    Job.objects.bulk_create(
        [Job(task_path="demo.tasks.noop", rate_key=key, rate_limit="1/h") for key in keys for _ in range(2)]
    )
    claims = RateClaims()
    claimed: list[Job] = []
    for _ in range(len(keys) // RateClaims.KEYS + 1):
        claims.looked = -float("inf")  # look again now, as a second later
        claimed += claims.claim_rated_jobs(Job.objects.all(), ["default"], "w", room=200, lease=60.0)
    # One job of every key (its one slot an hour), the keys past the first looks too.
    assert sorted(job.rate_key for job in claimed) == keys


@pytest.mark.django_db
def test_a_job_given_back_unstarted_gives_its_slot_back_to_the_next_claim():
    """The hold watch, a stopping worker and a lost atomic group give back
    claimed jobs that never ran (release()): their claims do not count."""
    jobs(4, limit="2/m")
    first, _ = claim_all("a")
    assert len(first) == 2
    assert Job.objects.release("a", [first[1].pk]) == 1
    again, wait = claim_all("b")
    assert [job.pk for job in again] == [first[1].pk], "its slot, free again, takes it again first"
    assert 59 < wait <= 60, "and the key's two slots are taken again"


@pytest.mark.django_db
def test_the_slot_given_back_is_the_one_its_claim_took_not_a_later_claims():
    """Freeing a later claim's slot instead would let three claims into a
    minute of a two-a-minute key: the earlier slot frees first."""
    jobs(3, limit="2/m")
    [early], _ = Job.objects.claim_rated("a", ["default"], "k", room=1)
    # As if that claim were ten seconds older.
    RateSlot.objects.filter(key="k").update(free_at=F("free_at") - timedelta(seconds=10))
    Job.objects.filter(pk=early.pk).update(claimed_at=F("claimed_at") - timedelta(seconds=10))
    assert len(Job.objects.claim_rated("b", ["default"], "k", room=1)[0]) == 1
    earlier, later = RateSlot.objects.order_by("free_at")
    claimed_at = Job.objects.get(pk=early.pk).claimed_at
    assert earlier.free_at == claimed_at + timedelta(seconds=60), "a slot frees a period after its claim"

    assert Job.objects.release("a", [early.pk]) == 1
    assert RateSlot.objects.get(pk=later.pk).free_at == later.free_at, "the later claim's slot stays taken"
    assert RateSlot.objects.get(pk=earlier.pk).free_at == claimed_at, "free since the claim"
    assert [job.pk for job in claim_all("c")[0]] == [early.pk]


@pytest.mark.django_db
def test_a_slot_taken_under_an_options_limit_is_given_back_under_that_limit():
    """OPTIONS RATE_LIMITS wins over the row's limit in the claim, and so in
    the give-back; without it the slot cannot be told, and stays spent."""
    jobs(2, limit="2/m")
    [one], _ = Job.objects.claim_rated("a", ["default"], "k", room=1, limit="1/h")
    assert Job.objects.release("a", [one.pk]) == 1
    assert Job.objects.claim_rated("b", ["default"], "k", room=1, limit="1/h")[0] == [], "spent"
    age_slots("k", 3600)
    [again], _ = Job.objects.claim_rated("a", ["default"], "k", room=1, limit="1/h")
    assert Job.objects.release("a", [again.pk], {"k": "1/h"}) == 1
    [taken], _ = Job.objects.claim_rated("b", ["default"], "k", room=1, limit="1/h")
    assert taken.pk == again.pk
