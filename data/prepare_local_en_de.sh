#!/usr/bin/env bash
# Build a real English->German parallel corpus from Debian packages.
#
# Downloads a fixed, named list of packages with `apt-get download` into a
# work folder, unpacks them there with `dpkg-deb -x` (nothing is installed
# system-wide), fetches bookworm's Translation-en/-de indexes with a private
# apt configuration, and writes train/dev/test .en/.de files, sources.tsv,
# LICENSES.md and SHA256SUMS.  See data/README.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILDER="$HERE/local_en_de/build_corpus.py"

usage() {
  cat <<'USAGE'
Usage: data/prepare_local_en_de.sh [--out DIR] [--sources LIST] [--no-update]
                                   [--no-fetch] [--mirror URL]
                                   [--security-mirror URL] [--help]

Builds an English->German parallel corpus from Debian packages (bookworm).

  --out DIR         work and output folder (default: work/local_en_de under
                    the repository); downloads are reused on a re-run
  --sources LIST    comma-separated subset of: gettext, libreoffice-ui, gcc,
                    libreoffice-help, ding, debian-descriptions (default: all)
  --no-update       reuse the private apt lists in DIR (no apt-get update)
  --no-fetch        use only what is already unpacked in DIR (no apt at all)
  --mirror URL      Debian mirror (default http://deb.debian.org/debian)
  --security-mirror URL
                    (default http://deb.debian.org/debian-security)
  --help            show this help

Outputs in DIR: train.en train.de dev.en dev.de test.en test.de (UTF-8, one
sentence per line, line-aligned), sources.tsv, LICENSES.md, SHA256SUMS.
Needs: apt-get, dpkg-deb, python3 (installed with apt-get if missing, as root).
USAGE
}

no_fetch=0
for arg in "$@"; do
  case "$arg" in
    -h|--help) usage; exit 0 ;;
    --no-fetch) no_fetch=1 ;;
  esac
done

die() { echo "error: $*" >&2; exit 1; }

if [ "$no_fetch" -eq 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "the tool 'apt-get' is missing; this script needs a Debian system"
  command -v dpkg-deb >/dev/null 2>&1 || die "the tool 'dpkg-deb' is missing; install it with: apt-get install dpkg"
fi

if ! command -v python3 >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    die "the tool 'python3' is missing; install it as root with: apt-get install python3"
  fi
  echo "python3 is missing: installing Debian's python3 with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed, so python3 cannot be installed"
  apt-get install -y -qq --no-install-recommends python3 >/dev/null \
    || die "apt-get install python3 failed"
fi

[ -f "$BUILDER" ] || die "the builder $BUILDER is missing"
exec python3 "$BUILDER" "$@"
