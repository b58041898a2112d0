"""Each benchmark part, run in one invocation and stored under its name.
The ceiling runs next to each part it is compared with, so both see the same
machine load: the machine is shared, and ratios within a run are what count."""

import time

import ceiling
import drain as drain_part
import enqueue as enqueue_part
import history as history_part
import limits as limits_part
import shapes as shapes_part
import tank as tank_part
import workflows as workflows_part
from common import median, reset_jobs

MIX = {"slow_fraction": 0.001, "slow_seconds": 0.2}


def _ran_once(results: dict, ok: bool) -> None:
    results["each_ran_once"] = results.get("each_ran_once", True) and ok


def _paired(n: int, workers: int, rounds: int, **kwargs) -> dict:
    """The ceiling and ours alternately, ``rounds`` times; medians of each.
    One pair is not enough here: on this shared machine the ceiling alone
    moved between 12k and 35k jobs/s within one run."""
    roofs, ours_rows = [], []
    for _ in range(rounds):
        roofs.append(ceiling.drain(n, workers)["jobs_per_s"])
        ours_rows.append(drain_part.drain(n, workers, **kwargs))
    ours = median([row["jobs_per_s"] for row in ours_rows])
    roof = median(roofs)
    return {
        **ours_rows[-1],
        "jobs_per_s": ours,
        "ceiling_jobs_per_s": roof,
        "ratio": ours / roof,
        "rounds": {"ours": [row["jobs_per_s"] for row in ours_rows], "ceiling": roofs},
        "each_ran_once": all(row["each_ran_once"] for row in ours_rows),
    }


def drain(results: dict, sizes: dict) -> None:
    n, rounds, rows = sizes["drain_jobs"], sizes["drain_rounds"], []
    for workers in sizes["workers"]:
        rows.append(_paired(n, workers, rounds))
    # Django logs each task's start and finish at INFO; the same run with that
    # logger at WARNING shows what those log records cost.
    rows.append(_paired(n, 2, rounds, task_log="WARNING"))
    # Three queues: the per-queue claim shape.
    rows.append(_paired(n, 2, rounds, queues=("default", "email", "slow")))
    for row in rows:
        _ran_once(results, row["each_ran_once"])
    results["drain"] = rows
    results["ceiling"]["drain"] = {
        row["processes"]: row["ceiling_jobs_per_s"] for row in rows[: len(sizes["workers"])]
    }


def enqueue(results: dict, sizes: dict) -> None:
    # Alternating blocks, so a burst of load from elsewhere hits both sides.
    n, block = sizes["enqueue_jobs"], 100
    plain = ours = 0.0
    for _ in range(max(1, n // block)):
        plain += ceiling.single_insert(block)["seconds"]
        ours += enqueue_part.one_by_one(block, reset=False)["seconds"]
    done = max(1, n // block) * block
    bulk = enqueue_part.bulk(sizes["bulk_jobs"])
    # The same rows through MySQLdb's executemany (benchmarks/bulk_ratio.py alternates the two).
    reset_jobs()
    multi_row = ceiling.multi_row_insert(sizes["bulk_jobs"])["jobs_per_s"]
    results["ceiling"]["single_insert_per_s"] = done / plain
    results["ceiling"]["multi_row_insert_per_s"] = multi_row
    results["enqueue"] = {
        "one_by_one_per_s": done / ours,
        "one_by_one_ratio": plain / ours,
        "bulk": bulk,
        "bulk_ratio_to_single_insert": bulk["jobs_per_s"] / (done / plain),
        "bulk_ratio_to_multi_row_insert": bulk["jobs_per_s"] / multi_row,
    }


def tank(results: dict, sizes: dict) -> None:
    seconds = sizes["tank_seconds"]
    rows = [tank_part.tank(2, 2, seconds), tank_part.tank(2, 2, seconds, **MIX)]
    for row in rows:
        _ran_once(results, row["each_ran_once"])
    results["tank"] = rows


def batch(results: dict, sizes: dict) -> None:
    """Batch size and the give-back rule: drain at W=2 for throughput, and
    the slow/fast mix for what a big batch costs the jobs queued behind a
    slow one."""
    drains, mixes = [], []
    for size in (20, 100, 200, 500):
        row = drain_part.drain(sizes["drain_jobs"], 2, batch=size)
        _ran_once(results, row["each_ran_once"])
        drains.append(row)
        for hold in (60.0, 0.1):
            row = tank_part.tank(2, 2, sizes["sweep_seconds"], batch=size, hold=hold, **MIX)
            _ran_once(results, row["each_ran_once"])
            mixes.append(row)
    behind = []
    for size in (20, 200):
        for hold in (60.0, 0.1):
            row = tank_part.behind_slow(size, hold)
            _ran_once(results, row["each_ran_once"])
            behind.append(row)
    results["batch"] = {"drain": drains, "mix": mixes, "behind_slow": behind}


def history(results: dict, sizes: dict) -> None:
    rows = history_part.history(sizes["history"], samples=sizes["history_samples"])
    base = rows[0]["one_queue"]["median_ms"]
    for row in rows:
        row["ratio_to_empty"] = row["one_queue"]["median_ms"] / base
    results["history"] = rows


def shapes(results: dict, sizes: dict) -> None:
    """Claims only, W=2, shapes interleaved over several rounds; medians."""
    n, plans = sizes["shape_jobs"], []
    for queues, names in (
        (["default"], ("candidates", "locking-select")),
        (["default", "email", "slow"], ("candidates", "per-queue")),
    ):
        figures: dict[str, list[float]] = {name: [] for name in names}
        for _ in range(sizes["shape_rounds"]):
            for name in names:
                figures[name].append(shapes_part.measure(name, n, 2, queues)["jobs_per_s"])
                time.sleep(0.2)
        plans.append(
            {"queues": len(queues), **{name: median(v) for name, v in figures.items()}, "rounds": figures}
        )
    results["shapes"] = plans


def limits(results: dict, sizes: dict) -> None:
    """What a limited key costs: one claim, and drains of 4 workers."""
    row = limits_part.limits(sizes["limit_jobs"], sizes["history_samples"])
    for drained in [row["drain_unlimited"], *row["drain_limited"]]:
        _ran_once(results, drained["each_ran_once"])
    results["limits"] = row


def batch_drain(results: dict, sizes: dict) -> None:
    """A 20,000-job batch drained by 2 workers against the plain drain in
    the same run, and a 1,000-step chain's overhead per step (workflows.py)."""
    row = workflows_part.run(sizes["drain_jobs"], 2, sizes["drain_rounds"], sizes["chain_steps"])
    _ran_once(results, row.pop("each_ran_once") and row["chain"]["each_ran_once"])
    results["batch_drain"] = row


def cluster(results: dict, sizes: dict) -> None:
    """The drain on a Galera cluster beside one server (benchmarks/cluster.py)."""
    import cluster as cluster_bench

    result = cluster_bench.run(sizes["drain_jobs"] // 5, sizes["drain_rounds"], workers=3)
    _ran_once(results, all(row["each_ran_once"] for row in result["rows"]))
    results["cluster"] = result
    cluster_bench.print_rows(result)
