#!/bin/sh
# A container entrypoint for the same image as the web app:
#
#   docker run IMAGE worker --queue email --processes 4 [--metrics-port 9100]
#   docker run IMAGE health --queue email --max-lag 300
#   docker run IMAGE migrate            (once per release, before new workers start)
#
# `exec` makes runqueue PID 1, so `docker stop` / Kubernetes deliver their
# SIGTERM to it; the supervisor passes the stop on to its workers, which
# finish the job in hand and exit, and it reaps them. Give the container a
# stop timeout (docker --stop-timeout, Kubernetes
# terminationGracePeriodSeconds) above your longest job. Tested by
# tests/test_deploy.py.
set -eu
cd "${APP_DIR:-/app}"
command="${1:-worker}"
[ $# -gt 0 ] && shift
case "$command" in
    worker) exec python manage.py runqueue "$@" ;;
    health) exec python manage.py queuehealth "$@" ;;
    stats) exec python manage.py queuestats "$@" ;;
    migrate) exec python manage.py migrate --noinput "$@" ;;
    *) exec "$command" "$@" ;;
esac
