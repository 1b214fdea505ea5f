#!/usr/bin/env bash
# Writes seed inputs for the `decode` fuzz target into fuzz/corpus/decode, built from the
# golden records of crates/state-core/tests/golden: each record's value, its key-prefixed
# form (key length byte, key, value) and its bare postcard payload.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
golden="$here/../crates/state-core/tests/golden"
out="$here/corpus/decode"
mkdir -p "$out"
for file in "$golden"/*.hex; do
    name="$(basename "$file" .hex)"
    key="$(sed -n 's/^key //p' "$file")"
    value="$(sed -n 's/^value //p' "$file")"
    key_len="$(printf '%02x' $((${#key} / 2)))"
    printf '%s' "$value" | xxd -r -p > "$out/$name-value"
    printf '%s%s%s' "$key_len" "$key" "$value" | xxd -r -p > "$out/$name-keyed"
    printf '%s' "${value:52}" | xxd -r -p > "$out/$name-payload"
done
echo "wrote $(ls "$out" | wc -l) seed inputs to $out"
