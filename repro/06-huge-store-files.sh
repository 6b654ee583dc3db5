#!/bin/bash
# Store files read whole, made huge with truncate (sparse: no disk space used).
# Expected: sessions.json -> STORE_CORRUPT (exit 65), doctor: store-corrupt, repairable;
#           a huge journal / lock owner record is never read whole.
# Before the fix: a 3 GiB sessions.json -> IO "ERR_OUT_OF_RANGE" (exit 74) for every command;
#   doctor: check-failed 'The value of "length" is out of range ... Received -1073741823',
#   0 repairable. A 3 GiB sessions.json.journal: the next `send` took ~15 s and 4 GB of memory.
SB="node $(cd "$(dirname "$0")/.." && pwd)/bin/switchboard"
S=$(mktemp -d)
$SB send hello --channel telegram --state-dir "$S" >/dev/null
D=$S/agents/main/sessions
truncate -s 3G "$D/sessions.json"
$SB sessions --state-dir "$S"; echo "sessions exit=$?"
$SB doctor --state-dir "$S" | grep -A1 problem; echo "doctor exit=${PIPESTATUS[0]}"
rm "$D/sessions.json"; $SB doctor --repair --state-dir "$S" >/dev/null
truncate -s 3G "$D/sessions.json.journal"
/usr/bin/time -f "send with a 3 GiB journal: %e s, %M KB" $SB send again --channel telegram --state-dir "$S" >/dev/null
rm -rf "$S"
