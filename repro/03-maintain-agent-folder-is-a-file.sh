#!/bin/bash
# The agent folder (agents/main) replaced by a plain file, then `switchboard maintain`.
# Expected: IO errors per stage, exit 74. Before the fix: the leftovers stage reported
# "INTERNAL: internal error: ENOTDIR ..." and maintain exited 1 (the code of a bug).
SB="node $(cd "$(dirname "$0")/.." && pwd)/bin/switchboard"
S=$(mktemp -d)
$SB send hi --channel telegram --state-dir "$S" >/dev/null
rm -rf "$S/agents/main" && echo x > "$S/agents/main"
$SB maintain --state-dir "$S" | grep FAILED; echo "maintain exit=${PIPESTATUS[0]}"
rm -rf "$S"
