#!/bin/bash
# The CommonJS chunks of dist/bundle/ (scripts/bundle.mjs) were sloppy-mode code: the ES modules
# they are made from are always strict, and so is everything the unit tests run (dist/src).
# Expected: every dist/bundle/*.js starts with "use strict". Before the fix: none did, e.g.
#   a function's `this` in a plain call is globalThis, a write to a frozen object is dropped.
cd "$(dirname "$0")/.." || exit 1
sloppy=0
for f in dist/bundle/*.js; do head -c 13 "$f" | grep -q '^"use strict";' || { echo "sloppy: $f"; sloppy=$((sloppy + 1)); }; done
echo "$sloppy sloppy chunk(s)"
