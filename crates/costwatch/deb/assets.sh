#!/usr/bin/env bash
# Writes the Debian package's generated files beside the binary they come
# from, where `[package.metadata.deb]` in crates/costwatch/Cargo.toml picks
# them up (cargo-deb reads `target/release/` there as the real profile folder):
#
#   PROFILE_DIR/deb/costwatch.1.gz      the manual page (`costwatch man`)
#   PROFILE_DIR/deb/completions/        bash, zsh and fish (`costwatch completions`)
#   PROFILE_DIR/deb/costwatch.service   systemd/costwatch.service, running /usr/bin/costwatch
#   PROFILE_DIR/deb/costwatch.yaml      config/costwatch.example.yaml, reading the rules
#                                       shipped in /etc/costwatch/rules
#
#   usage: crates/costwatch/deb/assets.sh PROFILE_DIR    (e.g. target/release)
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 PROFILE_DIR" >&2; exit 2; }
profile=$1
repo=$(cd "$(dirname "$0")/../../.." && pwd)
bin="$profile/costwatch"
[ -x "$bin" ] || { echo "$0: no costwatch binary in $profile: build it first" >&2; exit 1; }

out="$profile/deb"
rm -rf "$out"
mkdir -p "$out/completions"

"$bin" man | gzip -9n >"$out/costwatch.1.gz"
"$bin" completions bash >"$out/completions/costwatch"
"$bin" completions zsh >"$out/completions/_costwatch"
"$bin" completions fish >"$out/completions/costwatch.fish"

# The unit names the binary where a manual install puts it.
sed 's|/usr/local/bin/costwatch|/usr/bin/costwatch|g' \
  "$repo/systemd/costwatch.service" >"$out/costwatch.service"
if grep -q /usr/local "$out/costwatch.service"; then
  echo "$0: the packaged unit still names /usr/local" >&2
  exit 1
fi

# The example leaves the rules to the binary's built-in copy; the package
# ships them in /etc/costwatch/rules, so its config reads them from there.
sed -e '/^rules: \[\]$/d' -e 's|^# rules: \[rules\]$|rules: [rules]|' \
  "$repo/config/costwatch.example.yaml" >"$out/costwatch.yaml"
if ! grep -qx 'rules: \[rules\]' "$out/costwatch.yaml"; then
  echo "$0: config/costwatch.example.yaml has no '# rules: [rules]' line to turn on" >&2
  exit 1
fi
