#!/usr/bin/env bash
# Turns the King James Bible that Debian ships (packages bible-kjv + bible-kjv-text) into the
# JSON Lines dataset `kjv_bible`: one document per chapter, 1,189 lines, about 4.3 MB.
#
#   {"text": "Genesis 1\n\nIn the beginning God created ...\nAnd the earth was ...",
#    "book": "Genesis", "chapter": 1}
#
# The text is the package's verses, one verse a line, after a "<Book> <chapter>" title line and a
# blank line; verse numbers are dropped. Nothing else is added.
#
# Output: $TITAN_DATA_DIR/kjv_bible.jsonl (TITAN_DATA_DIR defaults to $HOME/.cache/titan/datasets;
# the C++ side resolves `training.dataset = "kjv_bible"` to the same path).
# Idempotent: returns at once when the file exists (pass --force to rebuild). Installs bible-kjv
# with apt-get when the `bible` program is missing (needs root, as run_train.sh does).
set -euo pipefail

force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "prepare_kjv_bible.sh: unknown argument '$arg' (expected --force)" >&2; exit 2 ;;
  esac
done

data_dir="${TITAN_DATA_DIR:-${HOME:?HOME or TITAN_DATA_DIR must be set}/.cache/titan/datasets}"
out="$data_dir/kjv_bible.jsonl"
if [[ -s "$out" && $force -eq 0 ]]; then
  exit 0  # prepared already: nothing to say
fi

if ! command -v bible >/dev/null 2>&1; then
  echo "kjv_bible: installing Debian packages bible-kjv bible-kjv-text" >&2
  if [[ $(id -u) -ne 0 ]]; then
    echo "kjv_bible: the 'bible' program is missing; run: sudo apt-get install -y bible-kjv" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bible-kjv \
    || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \
         --no-install-recommends bible-kjv; }
fi

mkdir -p "$data_dir"
tmp="$(mktemp "$out.tmp.XXXXXX")"
trap 'rm -f "$tmp"' EXIT

# `bible` pretty-prints (its default): a blank line, "<Book> <chapter>", a blank line, then one
# line per verse, "  <n> <verse>"; -l sets the wrap width, so a huge one keeps verses whole.
bible -l 1000000 "Gen1:1-Rev22:21" | LC_ALL=C awk '
  # Literal replacement (no regex or "&"/backslash rules, which differ between awks).
  function replace_all(s, from, to,    out, i) {
    out = ""
    while ((i = index(s, from)) > 0) { out = out substr(s, 1, i - 1) to; s = substr(s, i + 1) }
    return out s
  }
  function esc(s) {
    s = replace_all(s, "\\", "\\\\"); s = replace_all(s, "\"", "\\\"")
    s = replace_all(s, "\t", "\\t"); s = replace_all(s, "\r", "\\r")
    return replace_all(s, "\n", "\\n")
  }
  function flush() {
    if (title == "") return
    printf "{\"text\": \"%s\", \"book\": \"%s\", \"chapter\": %d}\n", esc(text), esc(book), chapter
  }
  /^$/ { next }
  /^[^ ]/ {
    flush()
    title = $0
    book = title; sub(/ [0-9]+$/, "", book)
    chapter = title; sub(/^.* /, "", chapter)
    text = title "\n"
    next
  }
  {
    verse = $0
    sub(/^ *[0-9]+ /, "", verse)
    text = text "\n" verse
  }
  END { flush() }
' > "$tmp"

lines=$(wc -l < "$tmp")
if [[ "$lines" -ne 1189 ]]; then
  echo "kjv_bible: expected 1189 chapters from 'bible', got $lines; $out not written" >&2
  exit 1
fi
chmod 644 "$tmp"
mv -f "$tmp" "$out"
trap - EXIT
echo "kjv_bible: wrote $out ($lines chapters, $(wc -c < "$out") bytes)"
