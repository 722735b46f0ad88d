#!/usr/bin/env bash
# The Debian package, built by cargo-deb from an existing costwatch binary
# (CI's debug build: no release build is needed), then installed with dpkg
# into an empty root, where the installed binary checks the installed config
# and rules and runs the demo.
#
#   usage: tests/deb/package.sh PROFILE_DIR_OR_BINARY   (e.g. "$CARGO_TARGET_DIR/debug")
#
#   CARGO_DEB   the cargo-deb binary (default: what .ci/cargo-deb.sh prints)
set -euo pipefail
cd "$(dirname "$0")/../.."

[ $# -eq 1 ] || { echo "usage: $0 PROFILE_DIR_OR_BINARY" >&2; exit 2; }
bin=$1
[ -d "$bin" ] && bin="$bin/costwatch"
[ -x "$bin" ] || { echo "$0: no costwatch binary at $bin" >&2; exit 1; }
CARGO_DEB=${CARGO_DEB:-$(bash .ci/cargo-deb.sh)}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { printf -- '--- %s\n' "$*"; }

# cargo-deb packages `target/release/costwatch` of the target folder cargo
# names; a folder of our own holding the given binary there keeps it from
# ever building (--no-build) and from touching the real target folder.
# --fast: the debug binary, stripped, is over 100 MB, and xz at its default
# level takes minutes over it.
step "generated assets and the package"
mkdir -p "$tmp/target/release" "$tmp/out"
cp "$bin" "$tmp/target/release/costwatch"
crates/costwatch/deb/assets.sh "$tmp/target/release"
CARGO_TARGET_DIR="$tmp/target" "$CARGO_DEB" -p costwatch --no-build --locked --fast \
  --output "$tmp/out/" >"$tmp/cargo-deb.log" 2>&1 \
  || { cat "$tmp/cargo-deb.log" >&2; fail "cargo-deb"; }
deb=$(ls "$tmp"/out/costwatch_*.deb)
echo "built $(basename "$deb") ($(du -h "$deb" | cut -f1))"

step "dpkg-deb --info and --contents"
dpkg-deb --info "$deb" >"$tmp/info"
for field in "Package: costwatch" "Section: admin" "Priority: optional" "Maintainer: " "Depends: " "Description: "; do
  grep -q "^ $field" "$tmp/info" || fail "control has no '$field'"
done
dpkg-deb --contents "$deb" | awk '{print $NF}' | sed 's|^\./|/|' >"$tmp/contents"
assets=(
  /usr/bin/costwatch
  /usr/lib/systemd/system/costwatch.service
  /etc/costwatch/costwatch.yaml
  /etc/costwatch/rules/no_cache.yaml
  /etc/costwatch/rules/oversized_model.yaml
  /etc/costwatch/rules/retry_loop.yaml
  /usr/share/man/man1/costwatch.1.gz
  /usr/share/bash-completion/completions/costwatch
  /usr/share/zsh/vendor-completions/_costwatch
  /usr/share/fish/vendor_completions.d/costwatch.fish
  /usr/share/doc/costwatch/copyright
  /usr/share/doc/costwatch/LICENSE-DejaVu.txt
)
for path in "${assets[@]}"; do
  grep -qx "$path" "$tmp/contents" || fail "the package has no $path"
done
grep -q "Apache-2.0" <(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/doc/costwatch/copyright) \
  || fail "the copyright file does not name the licence"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles >"$tmp/conffiles"
for path in $(grep '^/etc/' "$tmp/contents" | grep -v '/$'); do
  grep -qx "$path" "$tmp/conffiles" || fail "$path is not a conffile"
done
[ "$(sort "$tmp/conffiles" | uniq -d)" = "" ] || fail "a conffile is listed twice"
grep "^ Depends: " "$tmp/info"
echo "$(wc -l <"$tmp/contents") entries, $(wc -l <"$tmp/conffiles") conffiles"

# An empty root with only dpkg's database: the package has no maintainer
# scripts, so dpkg never needs a shell inside it. Its dependencies (libc)
# are the host's; --force-depends because the root has none.
step "dpkg --root into an empty root"
root="$tmp/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
dpkg --root="$root" --force-depends --force-not-root --log=/dev/null -i "$deb" >"$tmp/dpkg.log" 2>&1 \
  || { cat "$tmp/dpkg.log" >&2; fail "dpkg -i"; }
dpkg --root="$root" -s costwatch | grep -qx "Status: install ok installed" || fail "dpkg does not list costwatch as installed"
for path in "${assets[@]}"; do
  [ -e "$root$path" ] || fail "dpkg did not install $path"
done
grep -qx "ExecStart=/usr/bin/costwatch run --config /etc/costwatch/costwatch.yaml" \
  "$root/usr/lib/systemd/system/costwatch.service" || fail "the unit does not run /usr/bin/costwatch"

step "costwatch check on the installed config and rules"
# Run from elsewhere: relative paths in the config follow its folder.
out=$(cd "$tmp" && "$root/usr/bin/costwatch" check --config "$root/etc/costwatch/costwatch.yaml" 2>&1) \
  || { echo "$out" >&2; fail "costwatch check"; }
echo "$out"
grep -q ": ok" <<<"$out" || fail "check did not say ok"
! grep -q "built in" <<<"$out" || fail "check used the built-in rules, not /etc/costwatch/rules"
for rule in no_cache oversized_model retry_loop; do
  grep -q "$rule" <<<"$out" || fail "check did not read the rule $rule from /etc/costwatch/rules"
done

step "costwatch demo --days 1"
out=$(cd "$tmp" && "$root/usr/bin/costwatch" demo --days 1 2>&1) || { echo "$out" >&2; fail "costwatch demo"; }
for id in replay-mismatch-a14896679e70 subagent-sol-9b31c0e4d2aa retry-loop-7f2e81c09ab5; do
  grep -q "$id" <<<"$out" || { echo "$out" >&2; fail "demo did not name $id"; }
done
echo "demo: named the seed window's three sessions"

step "the manual page"
page=$(zcat "$root/usr/share/man/man1/costwatch.1.gz")
grep -q '^\.SH NAME' <<<"$page" || fail "the manual page has no NAME section"
if command -v man >/dev/null 2>&1; then
  MANWIDTH=80 man -l "$root/usr/share/man/man1/costwatch.1.gz" 2>/dev/null | head -n 5
fi

echo "the Debian package: ok"
