#!/bin/bash
# Ctrl+D (or Ctrl+C) at the [y/N] question of a destructive command.
# Expected: taken as "no" -> "nothing changed", exit 0, no stack.
# Before the fix: "internal error: Aborted with Ctrl+D", exit 1, AbortError stack trace.
SB="node $(cd "$(dirname "$0")/.." && pwd)/bin/switchboard"
S=$(mktemp -d)
$SB send hello --channel telegram --state-dir "$S" >/dev/null
for key in '\004' '\003'; do
  (sleep 2; printf "$key") | script -qec "$SB sessions reset agent:main:main --state-dir $S" /dev/null | tr -d '\r'
  echo "exit=${PIPESTATUS[1]}"
done
$SB sessions --json --state-dir "$S" | grep -c '"key":"agent:main:main"'
rm -rf "$S"
