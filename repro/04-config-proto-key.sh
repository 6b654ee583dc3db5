#!/bin/bash
# A "__proto__" key inside a config object. JSON5 keeps it as an own (unknown) key, so a plain
# config ignores it with a warning. Before the fix, the copies made for ${VAR}, $include and
# extends assigned it (copy[key] = value), which set the copy's prototype: its contents became
# inherited config — here dmScope "per-peer" — that validation located nowhere.
# Expected: sessionKey agent:main:main (dmScope main) in all four; before: agent:main:direct:bob
# for reference, include and extends.
SB="node $(cd "$(dirname "$0")/.." && pwd)/bin/switchboard"
D=$(mktemp -d); cd "$D"
echo '{}' > empty.json5; echo '{}' > base.json
P='"__proto__": {"dmScope": "per-peer"}'
echo "{\"session\": {$P}}" > plain.json5
echo "{\"session\": {$P}, \"note\": \"\${HOME}\"}" > reference.json5
echo "{\"session\": {$P}, \"messages\": {\"\$include\": \"./empty.json5\"}}" > include.json5
echo "{\"extends\": \"./base.json\", \"__proto__\": {\"session\": {\"dmScope\": \"per-peer\"}}}" > extends.json5
for f in plain reference include extends; do
  echo "$f: $($SB route resolve --channel telegram --peer direct:bob --json --config $f.json5 --state-dir "$D" 2>/dev/null | grep -o '"sessionKey":"[^"]*"')"
done
rm -rf "$D"
