"""The deploy recipes in docs/deploy: the systemd unit's command line and
stop settings, and the container entrypoint, run here as systemd and a
container runtime would run them."""

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from demo import tasks
from demo.models import Execution
from django_dbqueue.models import Job
from django_dbqueue.options import QueueOptions
from django_dbqueue.worker.process.timeouts import HARD_GRACE
from django_dbqueue.worker.supervisor.stuck import stop_grace
from tests.conftest import ROOT, once_per_run, subprocess_env, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

DEPLOY = ROOT / "docs" / "deploy"
APP = "/srv/mysite"


def service_section(path: Path) -> dict[str, str]:
    section, found = "", {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            found[key] = value
    return found


def expand(command: str, instance: str, env: dict[str, str]) -> list[str]:
    """systemd's ExecStart expansion: %i is the instance; an unquoted $VAR
    splits into words, ${VAR} stays one word."""
    words = []
    for word in shlex.split(command.replace("%i", instance)):
        if re.fullmatch(r"\$\w+", word):
            words += env.get(word[1:], "").split()
        else:
            words.append(re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), word))
    return words


def unit_environment(unit: dict[str, str]) -> dict[str, str]:
    """The unit's own Environment= assignments."""
    return dict(word.split("=", 1) for word in shlex.split(unit["Environment"]))


def here(argv: list[str]) -> list[str]:
    """The unit's /srv/mysite paths as this checkout's."""
    python = f"{APP}/.venv/bin/python"
    return [sys.executable if w == python else w.replace(APP, str(ROOT / "testproject")) for w in argv]


def stop_like_systemd(proc: subprocess.Popen, timeout: float) -> tuple[int, float]:
    """KillMode=control-group: KillSignal to every process of the service."""
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGTERM)
    return proc.wait(timeout), time.monotonic() - started


@once_per_run("test_processes.py runs graceful stops of runqueue")
def test_the_unit_stops_gracefully_when_systemd_stops_it(tmp_path):
    unit = service_section(DEPLOY / "dbqueue@.service")
    assert unit["KillSignal"] == "SIGTERM" and unit["KillMode"] == "control-group"
    assert unit["Restart"] == "always" and unit["SendSIGKILL"] == "yes"
    timeout = float(unit["TimeoutStopSec"])
    conf = {"QUEUE_ARGS": "--queue slow --processes 2"}  # /etc/dbqueue/slow.conf
    argv = here(expand(unit["ExecStart"], "slow", {**unit_environment(unit), **conf}))
    assert argv[1:] == [
        str(ROOT / "testproject" / "manage.py"),
        "runqueue",
        "--stop-timeout",
        "60",
        "--queue",
        "slow",
        "--processes",
        "2",
    ]
    # systemd's SIGKILL comes after every runqueue gave its jobs back: past the
    # stop timeout, a job's grace to reach a checkpoint, and the supervisor's kill.
    assert timeout > 60 + stop_grace(QueueOptions()) + HARD_GRACE + 10

    log = (tmp_path / "unit.log").open("wb")
    proc = subprocess.Popen(
        argv,
        cwd=ROOT / "testproject",
        env=subprocess_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        in_hand = tasks.sleep.enqueue(1.5, key="in hand")
        waiting = [tasks.sleep.enqueue(0.01) for _ in range(3)]
        # Claimed is not started: a job claimed but not yet begun is rightly
        # given back at a stop, so wait for the body itself.
        wait_for(lambda: Execution.objects.filter(key="in hand").exists())
        code, took = stop_like_systemd(proc, timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    assert code == 0, (tmp_path / "unit.log").read_text()
    assert took < timeout
    assert Job.objects.get(pk=in_hand.id).status == "SUCCESSFUL", "the job in hand finished"
    assert not Job.objects.filter(status="RUNNING").exists(), "nothing left claimed"
    assert {Job.objects.get(pk=r.id).status for r in waiting} <= {"READY", "SUCCESSFUL"}


UNITS = ("dbqueue@.service", "dbqueue-health@.service", "dbqueue-health@.timer", "dbqueue-restart@.service")


def installed_here(name: str, conf: Path) -> str:
    """A unit's text as it would run from this checkout, its instance's
    configuration file being ``conf``."""
    text = (DEPLOY / name).read_text()
    text = text.replace(f"{APP}/.venv/bin/python", sys.executable).replace(APP, str(ROOT / "testproject"))
    text = text.replace("/etc/dbqueue/%i.conf", str(conf))
    return re.sub(r"^(User|Group)=.*$", "", text, flags=re.M)  # no such user here


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="needs systemd-analyze")
def test_the_units_are_valid_systemd_units(tmp_path):
    conf = tmp_path / "slow.conf"
    conf.write_text("QUEUE_ARGS=--queue slow\nHEALTH_ARGS=--queue slow\n")
    for name in UNITS:
        (tmp_path / name.replace("@", "@slow")).write_text(installed_here(name, conf))
    for name in UNITS:
        run = subprocess.run(
            ["systemd-analyze", "verify", str(tmp_path / name.replace("@", "@slow"))],
            capture_output=True,
            text=True,
            timeout=60,
        )
        problems = [
            line for line in run.stderr.splitlines() if "mariadb.service" not in line and line.strip()
        ]
        assert run.returncode == 0 and not problems, run.stderr


@once_per_run("test_stats_health.py runs queuehealth")
def test_the_watchdog_fails_without_live_workers_and_its_failure_restarts_them(runqueue):
    health = service_section(DEPLOY / "dbqueue-health@.service")
    unit = (DEPLOY / "dbqueue-health@.service").read_text()
    assert re.search(r"^OnFailure=dbqueue-restart@%i\.service$", unit, flags=re.M)
    restart = service_section(DEPLOY / "dbqueue-restart@.service")
    assert restart["ExecStart"] == "/bin/systemctl restart dbqueue@%i.service" and "User" not in restart
    # The group's file names what to check; the unit's own default is everything.
    assert "HEALTH_ARGS=" in health["Environment"].split()

    def check(conf: dict[str, str]) -> subprocess.CompletedProcess:
        argv = here(expand(health["ExecStart"], "slow", conf))
        return subprocess.run(
            argv, cwd=ROOT / "testproject", env=subprocess_env(), capture_output=True, text=True, timeout=60
        )

    down = check({"HEALTH_ARGS": "--queue slow"})
    assert down.returncode == 1 and "0 live workers" in down.stderr, down.stderr
    worker = runqueue("--queue", "slow")
    wait_for(lambda: check({"HEALTH_ARGS": "--queue slow"}).returncode == 0)
    everything = check({})
    assert everything.returncode == 0, everything.stderr
    worker.signal_group(signal.SIGTERM)
    assert worker.wait(30) == 0


@once_per_run("test_processes.py runs graceful stops of runqueue, test_stats_health.py queuehealth")
def test_the_container_entrypoint_execs_runqueue_which_stops_on_sigterm_to_pid_1(tmp_path):
    env = subprocess_env(APP_DIR=str(ROOT / "testproject"))
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    log = (tmp_path / "container.log").open("wb")
    proc = subprocess.Popen(
        ["sh", str(DEPLOY / "entrypoint.sh"), "worker", "--queue", "slow"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        in_hand = tasks.sleep.enqueue(1.0, key="in hand")
        wait_for(lambda: Execution.objects.filter(key="in hand").exists())
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert b"runqueue" in cmdline, "exec: runqueue itself is the container's main process"
        # Within Kubernetes' default grace of 30 s: 15 s, 5 to reach a checkpoint, 5 to kill.
        assert cmdline[cmdline.index(b"--stop-timeout") + 1] == b"15"
        assert 15 + stop_grace(QueueOptions()) + HARD_GRACE < 30
        proc.send_signal(signal.SIGTERM)  # docker stop: to the main process only
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    assert code == 0, (tmp_path / "container.log").read_text()
    assert Job.objects.get(pk=in_hand.id).status == "SUCCESSFUL"

    health = subprocess.run(
        ["sh", str(DEPLOY / "entrypoint.sh"), "health", "--queue", "slow"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert health.returncode == 1 and "0 live workers" in health.stderr
