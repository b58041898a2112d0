#!/bin/sh
# A container entrypoint for the same image as the web app:
#
#   docker run IMAGE worker --queue email --processes 4 [--metrics-port 9100]
#   docker run IMAGE health --queue email --max-lag 300
#   docker run IMAGE migrate            (once per release, before new workers start)
#
# `exec` makes runqueue PID 1, so `docker stop` / Kubernetes deliver their
# SIGTERM to it; the supervisor passes the stop on to its workers, which give
# their unstarted claims back and let the job in hand run for up to
# STOP_TIMEOUT seconds (15 unless set), then interrupt it at its next
# checkpoint and give it back to resume elsewhere, its attempt unspent
# (docs/deploys.md); it reaps them and exits 0 by STOP_TIMEOUT + 10 s. Give
# the container a stop timeout above that: Kubernetes'
# terminationGracePeriodSeconds is 30 by default, docker's --stop-timeout
# only 10 (say --stop-timeout 30). Tested by tests/test_deploy.py.
set -eu
cd "${APP_DIR:-/app}"
command="${1:-worker}"
[ $# -gt 0 ] && shift
case "$command" in
    worker) exec python manage.py runqueue --stop-timeout "${STOP_TIMEOUT:-15}" "$@" ;;
    health) exec python manage.py queuehealth "$@" ;;
    stats) exec python manage.py queuestats "$@" ;;
    migrate) exec python manage.py migrate --noinput "$@" ;;
    *) exec "$command" "$@" ;;
esac
