"""What MySQL's binary log costs the queue: the drain and one-by-one enqueue
on the MySQL server of ``./dev mysql`` with its defaults (binary log on,
``sync_binlog=1``, ``binlog_row_image=FULL``) beside ``sync_binlog=0`` and
beside ``binlog_row_image=MINIMAL``, the settings interleaved round by round
so that load from elsewhere falls on each alike.

    DBQUEUE_DATABASE=mysql .venv/bin/python benchmarks/binlog.py [--rounds 3] [--jobs 4000]

Both are global settings the server takes at run time; the script sets
them for its run (it needs SUPER or SYSTEM_VARIABLES_ADMIN, as root on the
test server has) and puts the server's own values back at the end. The
binary log itself cannot be turned off without a restart, so "off" is not
measured here: ``sync_binlog=0`` leaves the writes and drops their flush.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

SETTINGS = {
    "defaults (sync_binlog=1, FULL)": {"sync_binlog": 1, "binlog_row_image": "FULL"},
    "sync_binlog=0": {"sync_binlog": 0, "binlog_row_image": "FULL"},
    "binlog_row_image=MINIMAL": {"sync_binlog": 1, "binlog_row_image": "MINIMAL"},
}


def set_globals(values: dict[str, object]) -> None:
    conn = common.raw_connect(None)
    with conn.cursor() as cursor:
        for name, value in values.items():
            cursor.execute(f"SET GLOBAL {name} = %s", [value])
    conn.close()


def read_globals() -> dict[str, object]:
    conn = common.raw_connect(None)
    with conn.cursor() as cursor:
        cursor.execute("SELECT @@GLOBAL.sync_binlog, @@GLOBAL.binlog_row_image, @@log_bin")
        sync, image, log_bin = cursor.fetchone()
    conn.close()
    if not log_bin:
        raise SystemExit("this server's binary log is off: nothing to measure")
    return {"sync_binlog": sync, "binlog_row_image": image}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=4000, help="jobs per drain")
    parser.add_argument("--enqueues", type=int, default=1000, help="one-by-one enqueues per round")
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    if common.engine() != "mysql":
        raise SystemExit("run it with DBQUEUE_DATABASE=mysql: MariaDB's binary log is off by default")
    common.configure()
    common.create_database()
    import drain
    import enqueue
    from django.db import connections

    own = read_globals()
    figures: dict[str, dict[str, list[float]]] = {name: {"drain": [], "enqueue": []} for name in SETTINGS}
    try:
        for number in range(1, args.rounds + 1):
            for name, values in SETTINGS.items():
                set_globals(values)
                connections.close_all()  # a session takes binlog_row_image when it connects
                figures[name]["enqueue"].append(enqueue.one_by_one(args.enqueues)["jobs_per_s"])
                result = drain.drain(args.jobs, args.processes)
                if not result["each_ran_once"]:
                    raise SystemExit(f"{name}: not every job ran exactly once: {result['by_status']}")
                figures[name]["drain"].append(result["jobs_per_s"])
                print(
                    f"round {number}, {name}: enqueue {figures[name]['enqueue'][-1]:,.0f}/s, "
                    f"drain W={args.processes} {figures[name]['drain'][-1]:,.0f} jobs/s",
                    flush=True,
                )
    finally:
        set_globals(own)
        common.drop_database()
    base = next(iter(SETTINGS))
    print(f"\nmedians of {args.rounds} rounds (ratio to MySQL's defaults):")
    for name in SETTINGS:
        enq, dra = (common.median(figures[name][part]) for part in ("enqueue", "drain"))
        enq0, dra0 = (common.median(figures[base][part]) for part in ("enqueue", "drain"))
        print(
            f"  {name:32} enqueue {enq:7,.0f}/s ({enq / enq0:.2f}x)   "
            f"drain {dra:7,.0f} jobs/s ({dra / dra0:.2f}x)"
        )


if __name__ == "__main__":
    main()
