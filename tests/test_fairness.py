"""Fair share: jobs with a fairness key are claimed in turns among the keys,
in proportion to their weights, and the ordinary claim leaves them alone."""

import random
import signal
import time
from collections import Counter

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from demo.tasks import add, per_tenant
from django_dbqueue import bulk_enqueue, task
from django_dbqueue.backend import DatabaseBackend
from django_dbqueue.exceptions import OptionsError
from django_dbqueue.models import Job
from django_dbqueue.options import QueueOptions
from django_dbqueue.tasks_api import InvalidTask
from django_dbqueue.transitions.fair import (
    KEYS_MAX,
    KEYS_PER_CLAIM,
    FairClaims,
    allocate,
    claim_fair,
    keys_with_jobs,
)
from django_dbqueue.transitions.shapes import claim_from_queues
from tests.conftest import once_per_run, wait_for
from tests.rows import inserted


def keyed(n: int, key: str, queue: str = "default", priority: int = 0) -> list[Job]:
    return inserted(
        [
            Job(task_path="demo.tasks.noop", fairness_key=key, queue_name=queue, priority=priority)
            for _ in range(n)
        ]
    )


def fair_claims(fair: FairClaims, claims: int, size: int, queues: tuple[str, ...] = ("default",)) -> Counter:
    """What ``claims`` worker claims of ``size`` took, by fairness key (None:
    the jobs without one)."""
    jobs, taken = Job.objects.all(), Counter()
    for _ in range(claims):
        batch = fair.claim_fair_share(
            jobs, list(queues), "w", size, 60.0, lambda n: claim_from_queues(jobs, list(queues), "w", n, 60.0)
        )
        taken.update(job.fairness_key for job in batch)
    return taken


def test_allocate_gives_each_key_its_weighted_share_over_small_claims():
    weights = {"a": 3.0, "b": 1.0, "c": 2.0}
    credit: dict[str, float] = {}
    rng = random.Random(7)
    given = Counter()
    for _ in range(60):
        shares = allocate(weights, weights.get, 1, credit, rng)
        assert sum(shares.values()) == 1
        given.update(shares)
    # Every claim of one job went to one key; over 60 claims, exactly by weight
    # to within the one job a carried credit may hold.
    for key, weight in weights.items():
        assert abs(given[key] - 60 * weight / 6) <= 1, given
    assert all(-1 <= value <= 1 for value in credit.values())


def test_with_more_keys_than_a_claim_serves_claims_take_them_in_turns():
    fair = FairClaims(rng=random.Random(2))
    keys = [f"t{i:03d}" for i in range(3 * KEYS_PER_CLAIM)]
    turns = [fair.turn(keys) for _ in range(3)]
    assert all(len(turn) == KEYS_PER_CLAIM for turn in turns)
    assert sorted(key for turn in turns for key in turn) == keys, "each key once in three claims"


@pytest.mark.django_db
def test_the_ordinary_claim_leaves_jobs_with_a_fairness_key_alone():
    keyed(3, "tenant:a")
    plain = inserted([Job(task_path="demo.tasks.noop")])[0]
    assert [job.pk for job in Job.objects.claim("w", limit=10)] == [plain.pk]
    assert [job.pk for job in claim_from_queues(Job.objects.all(), ["default", "email"], "w", 10, 60.0)] == []


@pytest.mark.django_db
def test_weights_three_to_one_give_three_to_one_over_a_window_of_claims():
    keyed(200, "vip")
    keyed(200, "basic")
    taken = fair_claims(FairClaims({"vip": 3}, random.Random(3)), claims=20, size=4)
    # No jobs without a key: their share goes to the keys.
    assert taken == {"vip": 60, "basic": 20}, taken


@pytest.mark.django_db
def test_jobs_without_a_key_count_as_one_more_key_of_weight_one():
    keyed(100, "a")
    keyed(100, "b")
    Job.objects.bulk_create([Job(task_path="demo.tasks.noop") for _ in range(100)])
    taken = fair_claims(FairClaims(rng=random.Random(5)), claims=10, size=9)
    assert sum(taken.values()) == 90
    assert all(abs(taken[key] - 30) <= 6 for key in ("a", "b", None)), taken


@pytest.mark.django_db
def test_a_small_key_behind_a_big_one_is_claimed_at_once_and_priority_orders_each_key():
    keyed(300, "big")
    small = keyed(5, "small")
    urgent = keyed(1, "big", priority=10)
    fair = FairClaims(rng=random.Random(1))
    [first, *_] = batch = fair_claims_batch(fair, size=20)
    assert {job.pk for job in small} <= {job.pk for job in batch}, (
        "the five behind 300 come in the first claim"
    )
    assert first.pk == urgent[0].pk, "within a key, higher priority first"
    assert Counter(job.fairness_key for job in batch) == {"small": 5, "big": 15}
    # In turns (the batch runs in this order), not after big's share.
    at = [i for i, job in enumerate(batch) if job.fairness_key == "small"]
    assert at[0] < 2 and {b - a for a, b in zip(at, at[1:], strict=False)} == {2}, at


@pytest.mark.django_db
def test_a_small_keys_share_runs_in_the_first_turns_of_a_big_batch_by_weight():
    """Ten of a small tenant's jobs in a claim of 200: run within its first
    twenty jobs (they were spread up to position 190), a key of weight 3
    taking three turns for one."""
    keyed(400, "big")
    keyed(10, "small")
    batch = fair_claims_batch(FairClaims(rng=random.Random(1)), size=200)
    assert Counter(job.fairness_key for job in batch) == {"small": 10, "big": 190}
    at = [i for i, job in enumerate(batch) if job.fairness_key == "small"]
    assert max(at) < 20, at
    Job.objects.all().delete()
    keyed(400, "vip")
    keyed(400, "other")
    batch = fair_claims_batch(FairClaims({"vip": 3}, random.Random(1)), size=40)
    first = [job.fairness_key for job in batch[:8]]
    assert Counter(first) == {"vip": 6, "other": 2}, first
    order = [job.pk for job in batch if job.fairness_key == "vip"]
    assert order == sorted(order), "each key's jobs in claim order"


def fair_claims_batch(fair: FairClaims, size: int) -> list[Job]:
    jobs = Job.objects.all()
    return fair.claim_fair_share(
        jobs, ["default"], "w", size, 60.0, lambda n: claim_from_queues(jobs, ["default"], "w", n, 60.0)
    )


@pytest.mark.django_db
def test_keys_compare_byte_for_byte_and_are_read_from_every_queue():
    keyed(2, "T")
    keyed(2, "t", queue="email")
    keyed(1, "t ")
    assert sorted(keys_with_jobs(Job.objects.all(), ["default", "email"])) == ["T", "t", "t "]
    batch = claim_fair(Job.objects.all(), ["default", "email"], "w", {"t": 5}, 60.0, 5)
    assert [(job.fairness_key, job.queue_name) for job in batch] == [("t", "email")] * 2


@pytest.mark.django_db
def test_a_look_past_the_most_keys_goes_on_from_the_last_key_read():
    for name in "abcde":
        keyed(1, name)
    jobs = Job.objects.all()
    assert keys_with_jobs(jobs, ["default"], limit=2) == ["a", "b"]
    assert keys_with_jobs(jobs, ["default"], after="b", limit=2) == ["c", "d"]
    assert keys_with_jobs(jobs, ["default"], after="d", limit=2) == ["e", "a"], "round to the start"
    assert KEYS_MAX >= 100


@pytest.mark.django_db
def test_queues_without_keys_send_the_ordinary_claim_alone_between_looks():
    Job.objects.bulk_create([Job(task_path="demo.tasks.noop") for _ in range(10)])
    jobs, fair = Job.objects.all(), FairClaims()

    def ordinary(n: int) -> list[Job]:
        return claim_from_queues(jobs, ["default"], "w", n, 60.0)

    with CaptureQueriesContext(connection) as alone:
        assert len(ordinary(2)) == 2
    fair.claim_fair_share(jobs, ["default"], "w", 2, 60.0, ordinary)  # the look (one dive), then the claim
    with CaptureQueriesContext(connection) as within:
        assert len(fair.claim_fair_share(jobs, ["default"], "w", 2, 60.0, ordinary)) == 2
    assert len(within) == len(alone)
    assert "fairness_key" not in within[0]["sql"].replace("fairness_key` IS NULL", "").replace(
        'fairness_key" IS NULL', ""
    ), "the same read, with fairness_key IS NULL"


@pytest.mark.django_db
def test_enqueue_stores_the_fairness_key_per_call_also_in_bulk_and_with_using():
    result = per_tenant.enqueue("acme", 1)
    results = bulk_enqueue(per_tenant, [(("acme", 2), {}), (("globex", 3), {})])
    one = add.using(fairness_key="tenant:initech").enqueue(1, 2)
    rows = Job.objects.in_bulk([int(r.id) for r in [result, *results, one]])
    assert [row.fairness_key for row in rows.values()] == [
        "tenant:acme",
        "tenant:acme",
        "tenant:globex",
        "tenant:initech",
    ]


@pytest.mark.django_db
def test_a_key_function_returning_none_makes_an_ordinary_job_also_among_keyed_ones_in_bulk():
    def tenant_or_none(tenant, index):
        return None if tenant == "-" else f"tenant:{tenant}"

    keyed = per_tenant.using(fairness_key=tenant_or_none)
    one = keyed.enqueue("-", 1)
    many = bulk_enqueue(keyed, [(("-", 2), {}), (("acme", 3), {}), (("-", 4), {})])
    rows = Job.objects.in_bulk([int(r.id) for r in [one, *many]])
    assert [row.fairness_key for row in rows.values()] == [None, None, "tenant:acme", None]


def test_a_fairness_key_with_a_concurrency_key_or_an_empty_one_is_refused():
    def f() -> None: ...

    with pytest.raises(InvalidTask, match="cannot have both a concurrency_key and a fairness_key"):
        task(concurrency_key="k", concurrency_limit=1, fairness_key="t")(f)
    with pytest.raises(InvalidTask, match="fairness_key must be a non-empty string"):
        task(fairness_key="")(f)
    with pytest.raises(InvalidTask, match="cannot have both"):
        per_tenant.using(concurrency_key="k", concurrency_limit=1)


@pytest.mark.django_db
def test_a_row_written_with_both_keys_is_a_limited_job_and_its_fairness_key_is_ignored():
    [both] = inserted(
        [Job(task_path="demo.tasks.noop", concurrency_key="c", concurrency_limit=1, fairness_key="f")]
    )
    jobs = Job.objects.all()
    assert keys_with_jobs(jobs, ["default"]) == []
    assert claim_fair(jobs, ["default"], "w", {"f": 1}, 60.0, 1) == []
    assert [job.pk for job in jobs.claim_limited("w", ["default"], ["c"])] == [both.pk]


def test_fairness_weights_must_be_numbers_above_zero_per_key():
    assert QueueOptions.parse({"FAIRNESS_WEIGHTS": {"vip": 3}}).FAIRNESS_WEIGHTS == {"vip": 3.0}
    with pytest.raises(OptionsError) as raised:
        QueueOptions.parse({"FAIRNESS_WEIGHTS": {"vip": 0, "": 1, "x": True}})
    assert raised.value.problems == [
        "OPTIONS FAIRNESS_WEIGHTS['vip'] must be a number above zero, not 0.",
        "OPTIONS FAIRNESS_WEIGHTS names ''; a fairness key is a non-empty string.",
        "OPTIONS FAIRNESS_WEIGHTS['x'] must be a number above zero, not True.",
    ]


@pytest.mark.parametrize(
    ("weight", "shown"),
    [
        (1e308, "1e+308"),
        (10**5000, "an integer of 5,001 digits"),
        (1_000_001, "1000001"),
        (1e-7, "1e-07"),
    ],
    ids=["1e308", "5001-digits", "million-and-one", "1e-7"],
)
def test_fairness_weights_past_a_million_or_below_a_millionth_are_refused_by_check(weight, shown):
    """1e308 passed the check, then overflowed the shares and killed every worker."""
    errors = DatabaseBackend("fair", {"OPTIONS": {"FAIRNESS_WEIGHTS": {"vip": weight}}}).check()
    assert [(e.id, e.msg) for e in errors] == [
        (
            "django_dbqueue.E003",
            f"OPTIONS FAIRNESS_WEIGHTS['vip'] must be from 0.000001 to 1,000,000 (the default weight is "
            f"1), not {shown}.",
        )
    ]
    assert QueueOptions.parse({"FAIRNESS_WEIGHTS": {"a": 1_000_000, "b": 0.000001}}).FAIRNESS_WEIGHTS == {
        "a": 1e6,
        "b": 1e-6,
    }


@pytest.mark.parametrize("weight", [float("nan"), float("inf"), -float("inf"), -1, "3", None, [1], True])
def test_fairness_weights_that_are_no_positive_number_are_refused_by_check(weight):
    errors = DatabaseBackend("fair", {"OPTIONS": {"FAIRNESS_WEIGHTS": {"vip": weight}}}).check()
    assert [(e.id, e.msg) for e in errors] == [
        (
            "django_dbqueue.E003",
            f"OPTIONS FAIRNESS_WEIGHTS['vip'] must be a number above zero, not {weight!r}.",
        )
    ]


@pytest.mark.django_db
def test_the_fair_claim_takes_a_weight_that_arrived_anyway_within_bounds():
    """Weights the check refuses, given to the claim all the same: the
    shares stay numbers, each key is served, the heaviest most."""
    weights = {"huge": 1e308, "nan": float("nan"), "neg": -1, "long": 10**5000, "text": "3"}
    for key in (*weights, "plain"):
        keyed(50, key)
    taken = fair_claims(FairClaims(weights, random.Random(2)), claims=10, size=20)
    # Counted at the largest weight, a million: served first, in full.
    assert (taken["huge"], taken["long"]) == (50, 50), taken
    # What is no number counts as the default weight, 1, as "plain" does;
    # -1 as the least, a millionth.
    assert all(taken[key] > 20 for key in ("nan", "text", "plain")), taken
    assert taken["neg"] < 5, taken


@once_per_run("the fair claim's SQL runs there in the tests above")
@pytest.mark.django_db(transaction=True)
def test_a_small_tenants_jobs_finish_while_a_big_ones_drain(runqueue):
    # 8,000 jobs of one tenant, then ten of another. In claim order (FIFO) the
    # ten come after all 8,000; with fair share they run within the first claims.
    big = 8000
    Job.objects.bulk_create(
        Job(task_path="demo.tasks.per_tenant", args=["big", i], fairness_key="tenant:big") for i in range(big)
    )
    small = [int(per_tenant.enqueue("small", i).id) for i in range(10)]
    assert min(small) > Job.objects.filter(fairness_key="tenant:big").latest("pk").pk
    host = runqueue("--processes", "2", "--queue", "default")
    started = time.monotonic()
    wait_for(
        lambda: Job.objects.filter(pk__in=small, status="SUCCESSFUL").count() == 10, timeout=20, interval=0.05
    )
    took = time.monotonic() - started
    done = Job.objects.filter(fairness_key="tenant:big", status="SUCCESSFUL").count()
    host.signal(signal.SIGTERM)
    assert host.wait() == 0
    print(f"the ten finished {took:.1f}s after start, with {done} of {big} big jobs done")
    assert done < big / 2, "the small tenant did not wait for the big one"
    assert took < 10, "within seconds (worker start-up included)"
    assert Job.objects.filter(fairness_key="tenant:big", status="READY").exists(), (
        "the big one was still draining"
    )
    assert connection.vendor == "mysql"
