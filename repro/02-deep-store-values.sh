#!/bin/bash
# A sessions.json entry or a transcript line holding a value nested 200 000 levels deep.
# Expected: sessions.json -> STORE_CORRUPT (exit 65), doctor --repair rebuilds it;
#           transcript line -> skipped and counted like any damaged line.
# Before the fix: send/ingest -> {"code":"INTERNAL"...} exit 1; sessions reset -> INTERNAL + stack;
#           doctor -> "check-failed ... Maximum call stack size exceeded", not repairable;
#           sessions transcript --raw/--json -> INTERNAL, exit 1, RangeError stack.
SB="node $(cd "$(dirname "$0")/.." && pwd)/bin/switchboard"
S=$(mktemp -d)
$SB send hello --channel telegram --state-dir "$S" >/dev/null
D=$S/agents/main/sessions
python3 - "$D" <<'PY'
import json, sys, glob
d = sys.argv[1]
deep = '[' * 200000 + ']' * 200000
transcript = glob.glob(d + '/*.jsonl')[0]
with open(transcript, 'a') as f:
    f.write('{"type":"message","id":"x","parentId":null,"message":{"role":"user","content":' + deep + '}}\n')
store = json.load(open(d + '/sessions.json'))
store['agent:main:main']['extra'] = '@'
open(d + '/sessions.json', 'w').write(json.dumps(store).replace('"@"', deep))
PY
$SB sessions transcript agent:main:main --raw --state-dir "$S" >/dev/null; echo "transcript --raw exit=$?"
$SB send again --channel telegram --state-dir "$S"; echo "send exit=$?"
$SB doctor --state-dir "$S" | grep -A1 problem; echo "doctor exit=${PIPESTATUS[0]}"
rm -rf "$S"
