#!/usr/bin/env bash
# Writes seed inputs for the `decode` fuzz target into fuzz/corpus/decode, built from the
# golden records of crates/state-core/tests/golden (format 4) and of its v3/, v2/ and v1/: each
# record's value, its key-prefixed form (key length byte, key, value) and its bare postcard
# payload (the value after the header of its format: 22, 14 or 26 bytes). The stable test
# crates/state-core/tests/codec/fuzz_target.rs runs the target's checks over the same seeds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
golden="$here/../crates/state-core/tests/golden"
out="$here/corpus/decode"
mkdir -p "$out"
# Hex to bytes with bash's printf alone (no xxd needed).
unhex() { printf "$(printf '%s' "$1" | sed 's/../\\x&/g')"; }
for entry in ":22" "v3:22" "v2:14" "v1:26"; do
    dir="${entry%%:*}"
    header_len="${entry##*:}"
    prefix="${dir:+$dir-}"
    for file in "$golden/$dir"/*.hex; do
        name="$prefix$(basename "$file" .hex)"
        key="$(sed -n 's/^key //p' "$file")"
        value="$(sed -n 's/^value //p' "$file")"
        key_len="$(printf '%02x' $((${#key} / 2)))"
        unhex "$value" > "$out/$name-value"
        unhex "$key_len$key$value" > "$out/$name-keyed"
        unhex "${value:$((header_len * 2))}" > "$out/$name-payload"
    done
done
echo "wrote $(ls "$out" | wc -l) seed inputs to $out"
