#!/bin/bash
# A transcript whose last "line" is 3 GiB of NULs (truncate: sparse, no disk space), then doctor.
# Expected: the line is reported unverifiable; doctor's memory stays bounded.
# Before the fix: doctor held the line whole plus a joined copy (~6.3 GB RSS, 15 s); under
# `ulimit -v 2000000` it aborted: "FATAL ERROR ... Allocation failed", a native stack, exit 134.
SB="node $(cd "$(dirname "$0")/.." && pwd)/bin/switchboard"
S=$(mktemp -d)
$SB send hello --channel telegram --state-dir "$S" >/dev/null
truncate -s 3G "$S"/agents/main/sessions/*.jsonl
/usr/bin/time -f "doctor: %e s, %M KB max RSS" $SB doctor --state-dir "$S" | grep -A1 problem
bash -c "ulimit -v 2000000; $SB doctor --state-dir $S >/dev/null 2>&1"; echo "doctor under a 2 GB limit: exit $? (65 expected)"
rm -rf "$S"
