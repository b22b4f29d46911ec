#!/usr/bin/env bash
# The controller's incident with the real thresholds (issue 21 item 7): plays an incident script
# (default scenarios/incidents/four_faults.yaml: a crash, a hang, a slow rank and wrong answers
# under load, the controller's defaults) against `myriad up --control`; bench/control_incident.py
# does the work. `myriad incident SCRIPT` plays the same script in the simulator.
#
# Usage: bench/control_incident.sh [SCRIPT] [path/to/myriad]
set -euo pipefail
exec python3 "$(dirname "$0")/control_incident.py" "$@"
