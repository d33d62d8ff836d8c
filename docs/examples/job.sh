#!/bin/sh
# An example job for boardctl (README "Workers: claim-next and boardctl", boardctl(1)):
#
#   boardctl work --board default -- docs/examples/job.sh
#
# boardctl runs it once per card it claims, only while the claim is held, with the card and
# the claim in its environment. What it prints goes through to boardctl's own output, and the
# last 64 KiB become the run's output (`boardctl runs CARD --output`). A JSON value written
# to $BOARDD_RESULT becomes the run's result. Its exit status decides where the card goes:
# 0 --on-success (default done), anything else --on-failure (default blocked).
#
# JOB_SECONDS (default 1) is how long it "works"; JOB_EXIT (default 0) its exit status.
set -eu
echo "job: card $BOARDD_CARD on board $BOARDD_BOARD, run $BOARDD_RUN, claim epoch $BOARDD_EPOCH"
sleep "${JOB_SECONDS:-1}"
printf '{"card":"%s","worked_s":%s}\n' "$BOARDD_CARD" "${JOB_SECONDS:-1}" > "$BOARDD_RESULT"
echo "job: done with $BOARDD_CARD"
exit "${JOB_EXIT:-0}"
