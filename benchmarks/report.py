"""The results as a table: every figure, the ceiling it is compared with,
the ratio, and the issue's target where there is one."""


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"
    return str(value)


def rows(r: dict) -> list[tuple]:
    out = []
    ceiling = r.get("ceiling", {})
    for row in r.get("drain", []):
        w = row["processes"]
        target = (">= 0.5x", row["ratio"] >= 0.5) if w == 2 else (None, None)
        label = f"drain W={w} (jobs/s)"
        if row.get("task_log", "INFO") != "INFO":
            label, target = f"drain W={w}, django.tasks log at {row['task_log']} (jobs/s)", (None, None)
        elif len(row["queues"]) > 1:
            label, target = f"drain W={w}, {len(row['queues'])} queues (jobs/s)", (None, None)
        out.append((label, row["jobs_per_s"], row["ceiling_jobs_per_s"], row["ratio"], *target))
    if "enqueue" in r:
        e, single = r["enqueue"], ceiling.get("single_insert_per_s")
        out.append(
            (
                "enqueue one-by-one (jobs/s)",
                e["one_by_one_per_s"],
                single,
                e["one_by_one_ratio"],
                ">= 0.8x",
                e["one_by_one_ratio"] >= 0.8,
            )
        )
        bulk = e["bulk"]["jobs_per_s"]
        out.append(
            (
                "enqueue bulk (jobs/s)",
                bulk,
                single,
                e["bulk_ratio_to_single_insert"],
                ">= 20,000/s",
                bulk >= 20_000,
            )
        )
        if "bulk_ratio_to_multi_row_insert" in e:
            out.append(
                (
                    "enqueue bulk beside executemany (jobs/s)",
                    bulk,
                    ceiling.get("multi_row_insert_per_s"),
                    e["bulk_ratio_to_multi_row_insert"],
                    ">= 0.5x",
                    e["bulk_ratio_to_multi_row_insert"] >= 0.5,
                )
            )
    roof = ceiling.get("drain", {}).get(2)
    for t in r.get("tank", []):
        kind = "mix" if t["slow_fraction"] else "no-op"
        rate = t["processed"] / t["seconds"]
        zero = t["backlog_zero_after_s"]
        out.append(
            (
                f"tank {kind}: produced / processed per s",
                f"{t['produced_per_s']:,.0f} / {rate:,.0f}",
                roof,
                rate / roof if roof else None,
                None,
                None,
            )
        )
        out.append(
            (
                f"tank {kind}: backlog at stop -> zero after (s)",
                f"{t['backlog_at_stop']} -> {_fmt(zero)}",
                None,
                None,
                "<= 1 s",
                zero is not None and zero <= 1.0,
            )
        )
        lat = t["latency_ms"]
        out.append(
            (
                f"tank {kind}: start latency p50/p95/p99 (ms)",
                f"{lat['p50']:.0f} / {lat['p95']:.0f} / {lat['p99']:.0f}",
                None,
                None,
                "p99 < 250",
                lat["p99"] < 250,
            )
        )
    for h in r.get("history", []):
        one, three = h["one_queue"], h["three_queues"]
        out.append(
            (
                f"claim of 100, {h['finished_rows']:,} finished: median/p99 ms (1 queue)",
                f"{one['median_ms']:.1f} / {one['p99_ms']:.1f}",
                None,
                h["ratio_to_empty"],
                "<= 1.2x empty",
                h["ratio_to_empty"] <= 1.2,
            )
        )
        out.append(
            (
                "   index reads per claim (1 queue / 3 queues)",
                f"{one['index_reads']:.0f} / {three['index_reads']:.0f}",
                None,
                None,
                None,
                None,
            )
        )
    for s in r.get("shapes", []):
        figures = {k: v for k, v in s.items() if k not in ("queues", "rounds")}
        best = max(figures, key=figures.get)
        text = ", ".join(f"{k} {v:,.0f}" for k, v in figures.items())
        out.append(
            (
                f"claim shapes, {s['queues']} queue(s), W=2 (claims/s)",
                text,
                roof,
                figures[best] / roof if roof else None,
                f"keep {best}",
                None,
            )
        )
    sweep = r.get("batch", {})
    for d in sweep.get("drain", []):
        out.append(
            (
                f"batch {d['batch']}: drain W=2 (jobs/s)",
                d["jobs_per_s"],
                roof,
                d["jobs_per_s"] / roof if roof else None,
                None,
                None,
            )
        )
    for b in sweep.get("mix", []):
        lat = b["latency_ms"]
        hold = "off" if b["hold"] >= 60 else f"{b['hold']}s"
        text = f"p50/p99 {lat['p50']:.0f}/{lat['p99']:.0f} ms, zero after {_fmt(b['backlog_zero_after_s'])} s"
        out.append((f"batch {b['batch']}, give-back {hold}: mix", text, None, None, None, None))
    for b in sweep.get("behind_slow", []):
        hold = "off" if b["hold"] >= 60 else f"{b['hold']}s"
        wait = b["fast_wait_ms"]
        text = f"wait p50/max {wait['p50']:.0f}/{wait['max']:.0f} ms"
        out.append(
            (
                f"batch {b['batch']}, give-back {hold}: 199 no-ops behind a 1 s job",
                text,
                None,
                None,
                None,
                None,
            )
        )
    out += _limit_rows(r.get("limits"))
    return out


def _limit_rows(limits: dict | None) -> list[tuple]:
    """A limited key's cost, against the same work unlimited (in the ceiling column)."""
    if not limits:
        return []
    claim = limits["claim_one_ms"]
    plain = limits["drain_unlimited"]["jobs_per_s"]
    out = [("claim of one job, limited key (ms)", claim["limited"], claim["unlimited"], None, None, None)]
    for row in limits["drain_limited"]:
        label = f"drain W=4, {row['keys']} key(s), limit {row['limit']} (jobs/s; vs unlimited)"
        out.append((label, row["jobs_per_s"], plain, row["jobs_per_s"] / plain, None, None))
    return out


def print_table(r: dict) -> None:
    m = r["machine"]
    server = m.get("server") or f"MariaDB {m['mariadb']}"  # results before MySQL runs named only MariaDB
    where = f"{m['nproc']} CPUs, {server}, Python {m['python']}"
    print(f"\ndjango-dbqueue benchmark, {m['date']}, {where}")
    header = ("figure", "value", "ceiling", "ratio", "target", "met")
    table = [header] + [
        tuple(
            _fmt(c) if i in (1, 2, 3) else ("yes" if c is True else "NO" if c is False else _fmt(c))
            for i, c in enumerate(row)
        )
        for row in rows(r)
    ]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for i, row in enumerate(table):
        print("| " + " | ".join(str(c).ljust(widths[j]) for j, c in enumerate(row)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    print(f"every job ran exactly once: {'yes' if r.get('each_ran_once', True) else 'NO'}")


if __name__ == "__main__":
    import json
    import sys

    results = json.loads(open(sys.argv[1]).read())
    # JSON turned the worker counts into strings.
    ceiling = results.get("ceiling", {})
    ceiling["drain"] = {int(k): v for k, v in ceiling.get("drain", {}).items()}
    print_table(results)
