#!/usr/bin/env bash
# Build the WMT14 English->German data of Vaswani et al. (2017) as plain text.
#
# Downloads five archives from statmt.org with curl or wget (resumable;
# archives already there with the server's size are kept), verifies them,
# extracts Europarl v7, Common Crawl and News Commentary v9 (train),
# newstest2013 (dev) and the full newstest2014 (test), cleans and filters the
# training pairs with the local corpus' functions and writes train/dev/test
# .en/.de files and SHA256SUMS.  See data/README.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILDER="$HERE/wmt14_en_de/build_wmt14.py"

usage() {
  cat <<'USAGE'
Usage: data/prepare_wmt14_en_de.sh [--out DIR] [--from-dir DIR] [--no-download]
                                   [--help]

Builds the WMT14 English->German training, dev (newstest2013) and test
(full newstest2014) sets from statmt.org's archives (roughly 1.5 GB).

  --out DIR       output folder (default: work/wmt14_en_de under the
                  repository); downloads go to DIR/downloads and are reused
  --from-dir DIR  use the five .tgz archives already in DIR (no download):
                  training-parallel-europarl-v7.tgz, training-parallel-
                  commoncrawl.tgz, training-parallel-nc-v9.tgz, dev.tgz,
                  test-full.tgz
  --no-download   use the archives already in DIR/downloads (no download)
  --help          show this help

Outputs in DIR: train.en train.de dev.en dev.de test.en test.de (UTF-8, one
sentence per line, line-aligned) and SHA256SUMS.  cmha train learns the
joint SentencePiece model itself.
Needs: python3 and, to download, curl or wget (python3 and curl are
installed with apt-get if missing, as root).
USAGE
}

download=1
for arg in "$@"; do
  case "$arg" in
    -h|--help) usage; exit 0 ;;
    --no-download|--from-dir|--from-dir=*) download=0 ;;
  esac
done

die() { echo "error: $*" >&2; exit 1; }

apt_install() {  # apt_install TOOL PACKAGE
  if [ "$(id -u)" -ne 0 ]; then
    die "the tool '$1' is missing; install it as root with: apt-get install $2"
  fi
  command -v apt-get >/dev/null 2>&1 || die "the tool '$1' is missing and there is no apt-get to install it"
  echo "$1 is missing: installing Debian's $2 with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed, so $2 cannot be installed"
  apt-get install -y -qq --no-install-recommends "$2" >/dev/null || die "apt-get install $2 failed"
}

if [ "$download" -eq 1 ] && ! command -v curl >/dev/null 2>&1 && ! command -v wget >/dev/null 2>&1; then
  apt_install curl curl
fi
command -v python3 >/dev/null 2>&1 || apt_install python3 python3

[ -f "$BUILDER" ] || die "the builder $BUILDER is missing"
exec python3 "$BUILDER" "$@"
