#!/bin/bash
# On the device: waits until the driver is done or MAX_WAIT_S passed, then tars everything so far into
# $OUT/dc.tgz (split into 15 MiB pieces dc.tgz.part_* if larger). Usage: bash poll.sh MAX_WAIT_S [BUDGET_S]
#   BUDGET_S (optional): move the driver's deadline to BUDGET_S seconds from now.
set -u
R=${DC_ROOT:-/root}; D=$R/dc; O=${OUT:-/tmp/dc_out}; mkdir -p "$O"
[ -n "${2:-}" ] && echo $(( $(date +%s) + $2 )) > "$D/deadline" && echo "deadline moved: $2 s from now"
T0=$(date +%s)
while [ ! -f "$D/DONE" ] && [ $(( $(date +%s) - T0 )) -lt "$1" ]; do
  kill -0 "$(cat "$D/driver.pid")" 2>/dev/null || { echo "driver not running"; break; }
  sleep 2
done
# the tuning table's driver logs in its launch's folder (launch_<k>/driver.log); its driver.out has the same lines
if [ -f "$D/driver.log" ]; then tail -n 25 "$D/driver.log"; tail -n 5 "$D/driver.out"; else tail -n 25 "$D/driver.out"; fi
tar -czf "$O/dc.tgz" -C "$R" dc
if [ "$(stat -c %s "$O/dc.tgz")" -gt 15728640 ]; then split -b 15m -d "$O/dc.tgz" "$O/dc.tgz.part_" && rm "$O/dc.tgz"; fi
ls -la "$O"; [ -f "$D/DONE" ] && echo CAMPAIGN_DONE
