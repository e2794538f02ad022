#!/usr/bin/env python3
"""Build a real English->German parallel corpus from Debian packages.

Usually run through data/prepare_local_en_de.sh; see data/README.md.
Stdlib only.  Deterministic: the same package versions (and the same
Translation indexes) give byte-identical output files.
"""

import argparse
import hashlib
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import aptfetch          # noqa: E402
import corpus_sources as cs  # noqa: E402
import debdesc           # noqa: E402
import ding              # noqa: E402
import licences          # noqa: E402
import lohelp            # noqa: E402
import mofile            # noqa: E402
import textclean         # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "work", "local_en_de")

# Split on the English side: bucket = first 8 hex digits of sha1(English
# string, UTF-8) / 2**32.  [0, DEV_FRACTION) -> dev, [DEV_FRACTION,
# DEV_FRACTION + TEST_FRACTION) -> test, the rest -> train.  An English
# string therefore never appears in two splits, and adding sources never
# moves a string from one split to another.  The fractions give about
# 2 000 pairs each for the full corpus.
DEV_FRACTION = 0.0115
TEST_FRACTION = 0.0115

TEXT_FILES = ["train.en", "train.de", "dev.en", "dev.de", "test.en", "test.de"]


# --------------------------------------------------------------------------
# reading the sources: each yields (origin, en, de, clean options)

def _mo_files(root):
    """Sorted .mo files under root whose path has .../de/LC_MESSAGES/."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        parts = dirpath.replace(os.sep, "/").split("/")
        if len(parts) >= 2 and parts[-1] == "LC_MESSAGES" and parts[-2] == "de":
            for fn in sorted(filenames):
                if fn.endswith(".mo"):
                    out.append(os.path.join(dirpath, fn))
    out.sort()
    return out


def _read_mo(path):
    with open(path, "rb") as f:
        return mofile.read_mo_pairs(f.read())


def _require(path, what):
    if not os.path.exists(path):
        raise aptfetch.FetchError("%s is missing (%s); run without --no-fetch to download it"
                                  % (what, path))


def read_gettext(pkgs):
    for pkg in cs.GETTEXT_PACKAGES:
        root = os.path.join(pkgs, pkg)
        _require(root, "the unpacked package '%s'" % pkg)
        for path in _mo_files(root):
            name = os.path.basename(path)
            for en, de in _read_mo(path):
                yield "%s/%s" % (pkg, name), en, de


def read_libreoffice_ui(pkgs):
    d = os.path.join(pkgs, cs.LIBREOFFICE_UI_PACKAGE, cs.LIBREOFFICE_UI_DIR)
    _require(d, "the LibreOffice catalogues of '%s'" % cs.LIBREOFFICE_UI_PACKAGE)
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".mo"):
            for en, de in _read_mo(os.path.join(d, fn)):
                yield fn, en, de


def read_gcc(pkgs):
    root = os.path.join(pkgs, cs.GCC_PACKAGE)
    _require(root, "the unpacked package '%s'" % cs.GCC_PACKAGE)
    found = [p for p in _mo_files(root) if os.path.basename(p) in cs.GCC_CATALOGUES]
    for path in found:
        for en, de in _read_mo(path):
            yield os.path.basename(path), en, de


def read_libreoffice_help(pkgs):
    en_root = os.path.join(pkgs, cs.HELP_EN_PACKAGE, cs.HELP_EN_DIR)
    de_root = os.path.join(pkgs, cs.HELP_DE_PACKAGE, cs.HELP_DE_DIR)
    _require(en_root, "the English LibreOffice help")
    _require(de_root, "the German LibreOffice help")
    for rel, uid, en, de in lohelp.help_pairs(en_root, de_root):
        yield "%s#%s" % (rel.replace(os.sep, "/"), uid), en, de


def read_ding(pkgs):
    path = os.path.join(pkgs, cs.DING_PACKAGE, cs.DING_FILE)
    _require(path, "the Ding dictionary")
    for no, en, de in ding.ding_pairs(path):
        yield "de-en:%d" % no, en, de


def read_descriptions(work):
    en_path = aptfetch.translation_file(work, "en")
    de_path = aptfetch.translation_file(work, "de")
    if not en_path or not de_path:
        raise aptfetch.FetchError("the Translation-en/-de indexes are missing under %s; "
                                  "run without --no-fetch to fetch them"
                                  % os.path.join(work, "apt", "lists"))
    for md5, part, en, de in debdesc.description_pairs(aptfetch.read_index(en_path),
                                                       aptfetch.read_index(de_path)):
        yield "%s:%s" % (md5, part), en, de


# How each source is cleaned: accelerators only exist in UI catalogues;
# markup in catalogues and help pages.
READERS = {
    "gettext": (read_gettext, "pkgs", dict(accelerators=True, markup=True)),
    "libreoffice-ui": (read_libreoffice_ui, "pkgs", dict(accelerators=True, markup=True)),
    "gcc": (read_gcc, "pkgs", dict(accelerators=True, markup=True)),
    "libreoffice-help": (read_libreoffice_help, "pkgs", dict(accelerators=False, markup=True)),
    "ding": (read_ding, "pkgs", dict(accelerators=False, markup=False)),
    "debian-descriptions": (read_descriptions, "work", dict(accelerators=False, markup=False)),
}


# --------------------------------------------------------------------------
# assembling

def _sha1(s):
    return hashlib.sha1(s.encode("utf-8")).hexdigest()


def split_of(en):
    """'dev', 'test' or 'train' for an English string (see DEV_FRACTION)."""
    b = int(_sha1(en)[:8], 16) / float(1 << 32)
    if b < DEV_FRACTION:
        return "dev"
    if b < DEV_FRACTION + TEST_FRACTION:
        return "test"
    return "train"


def collect(work, sources, log=print):
    """Read and clean the sources.

    Returns (pairs, stats): pairs maps (en, de) -> {source: first origin};
    stats maps source -> counters.
    """
    pkgs = os.path.join(work, "pkgs")
    pairs = {}
    stats = {}
    for src in cs.SOURCE_NAMES:
        if src not in sources:
            continue
        reader, arg, opts = READERS[src]
        t0 = time.time()
        st = {"raw": 0, "clean": 0, "sentence_like": 0, "unique": 0}
        seen = set()
        for origin, en, de in reader(pkgs if arg == "pkgs" else work):
            st["raw"] += 1
            c = textclean.clean_pair(en, de, **opts)
            if c is None:
                continue
            st["clean"] += 1
            if not textclean.sentence_like(*c):
                continue
            st["sentence_like"] += 1
            if c not in seen:
                seen.add(c)
            srcs = pairs.setdefault(c, {})
            if src not in srcs or origin < srcs[src]:
                srcs[src] = origin
        st["unique"] = len(seen)
        stats[src] = st
        log("  %-20s raw %7d  cleaned %7d  sentence-like %7d  unique %7d  (%.1fs)"
            % (src, st["raw"], st["clean"], st["sentence_like"], st["unique"], time.time() - t0))
    return pairs, stats


def _primary(srcs):
    for s in cs.SOURCE_NAMES:
        if s in srcs:
            return s, srcs[s]
    raise AssertionError("pair without a source")


def assign_splits(pairs):
    """{split: [(en, de, source, origin)]}, each list in its final order.

    train keeps every German version of an English string; dev and test keep
    one per English string (the one most sources agree on, then the one
    from the highest-priority source, then the smallest string), so that
    each test sentence has one reference.
    """
    by_en = {}
    for (en, de), srcs in pairs.items():
        by_en.setdefault(en, []).append((de, srcs))
    out = {"train": [], "dev": [], "test": []}
    for en in sorted(by_en):
        split = split_of(en)
        cands = by_en[en]
        if split != "train":
            def rank(item):
                de, srcs = item
                return (-len(srcs), cs.SOURCE_NAMES.index(_primary(srcs)[0]), de)
            cands = [min(cands, key=rank)]
        for de, srcs in cands:
            s, origin = _primary(srcs)
            out[split].append((en, de, s, origin))
    for split in out:
        # a deterministic shuffle: order by a hash of the pair
        out[split].sort(key=lambda r: (_sha1(r[0] + "\t" + r[1]), r[0], r[1]))
    return out


def _write_lines(path, lines):
    data = "".join(x + "\n" for x in lines).encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)
    return hashlib.sha256(data).hexdigest()


def write_outputs(out, splits):
    """Write the six text files and sources.tsv; return {file: sha256}."""
    sums = {}
    for split in ("train", "dev", "test"):
        rows = splits[split]
        for r in rows:
            for side in (r[0], r[1]):
                if "\n" in side or "\r" in side:
                    raise AssertionError("a line break survived cleaning: %r" % side)
        sums[split + ".en"] = _write_lines(os.path.join(out, split + ".en"), [r[0] for r in rows])
        sums[split + ".de"] = _write_lines(os.path.join(out, split + ".de"), [r[1] for r in rows])
    tsv = ["split\tline\tsource\torigin"]
    for split in ("train", "dev", "test"):
        for i, r in enumerate(splits[split], 1):
            tsv.append("%s\t%d\t%s\t%s" % (split, i, r[2], r[3].replace("\t", " ")))
    _write_lines(os.path.join(out, "sources.tsv"), tsv)
    lines = ["%s  %s" % (sums[f], f) for f in TEXT_FILES]
    _write_lines(os.path.join(out, "SHA256SUMS"), lines)
    return sums


def combined_checksum(sums):
    """sha256 of the SHA256SUMS text (one checksum for the six files)."""
    text = "".join("%s  %s\n" % (sums[f], f) for f in TEXT_FILES)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_licenses(work, out, sources):
    """LICENSES.md: each package used, its version and licences."""
    pkgs = os.path.join(work, "pkgs")
    lines = [
        "# Licences of the local English-German corpus",
        "",
        "Generated by data/prepare_local_en_de.sh.  The corpus is derived from the",
        "Debian packages below; each pair keeps the licence of the package it came",
        "from (sources.tsv names the source of every line; see the copyright file",
        "under pkgs/<package>/usr/share/doc/ in the work folder).  The corpus mixes",
        "licences and must not be committed or redistributed as one work.",
        "",
        "| source | package | version | licence (Files: *) | all licences named in the copyright file |",
        "|---|---|---|---|---|",
    ]
    for src in cs.SOURCE_NAMES:
        if src not in sources:
            continue
        for pkg in cs.SOURCE_PACKAGES[src]:
            path = licences.copyright_file(pkgs, pkg)
            if path is None:
                main, allnames, note = "?", "copyright file not found", ""
            else:
                with open(path, "r", encoding="utf-8", errors="replace") as f:
                    names, machine = licences.licences_of(f.read())
                via = os.path.relpath(path, pkgs).split(os.sep)[0]
                note = "" if via == pkg else " (from %s)" % via
                if machine:
                    main = names[0] if names else "?"
                    allnames = ", ".join(names) or "?"
                else:
                    main = (names[0] if names else "?") + " (free-form file)"
                    allnames = ", ".join(names) + " (keywords found)" if names else "?"
            lines.append("| %s | %s | %s | %s%s | %s |" % (
                src, pkg, aptfetch.deb_version(work, pkg), main, note,
                allnames.replace("|", "/")))
        if src == "debian-descriptions":
            lines.append("| %s | (archive index) | %s main Translation-en, Translation-de | "
                         "part of the Debian archive; no single licence stated | "
                         "descriptions are written by each package's maintainers |"
                         % (src, aptfetch.SUITE))
    _write_lines(os.path.join(out, "LICENSES.md"), lines)


def build(work, sources, fetch=True, update=True, mirror=aptfetch.DEFAULT_MIRROR,
          security_mirror=aptfetch.DEFAULT_SECURITY_MIRROR, log=print):
    """The whole pipeline; returns (stats, splits, sums)."""
    t0 = time.time()
    work = os.path.abspath(work)
    os.makedirs(work, exist_ok=True)
    if fetch:
        conf = aptfetch.write_apt_config(work, mirror, security_mirror)
        if update or not os.path.isdir(os.path.join(work, "apt", "lists")):
            aptfetch.apt_update(conf, log=log)
        packages = cs.packages_for(sources)
        if packages:
            debs = aptfetch.download(conf, work, packages, log=log)
            aptfetch.extract(work, debs, log=log)
        log("fetched in %.1fs" % (time.time() - t0))
    log("reading sources:")
    pairs, stats = collect(work, sources, log=log)
    splits = assign_splits(pairs)
    sums = write_outputs(work, splits)
    write_licenses(work, work, sources)
    stats["_time"] = time.time() - t0
    return stats, splits, sums


def report(stats, splits, sums, work, log=print):
    log("")
    log("per source (pairs kept in the splits, by first source):")
    per = {}
    for split, rows in splits.items():
        for r in rows:
            per.setdefault(r[2], {}).setdefault(split, 0)
            per[r[2]][split] += 1
    log("  %-20s %8s %8s %8s %8s" % ("source", "train", "dev", "test", "total"))
    for src in cs.SOURCE_NAMES:
        if src in per:
            d = per[src]
            log("  %-20s %8d %8d %8d %8d" % (src, d.get("train", 0), d.get("dev", 0),
                                          d.get("test", 0), sum(d.values())))
    tot = {k: len(v) for k, v in splits.items()}
    log("  %-20s %8d %8d %8d %8d" % ("all", tot["train"], tot["dev"], tot["test"],
                                      sum(tot.values())))
    log("")
    log("sha256 (also in %s):" % os.path.join(work, "SHA256SUMS"))
    for f in TEXT_FILES:
        log("  %s  %s" % (sums[f], f))
    log("combined checksum (sha256 of SHA256SUMS): %s" % combined_checksum(sums))
    log("outputs in %s (built in %.1fs)" % (work, stats.get("_time", 0.0)))


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="prepare_local_en_de.sh",
        description="Build an English-German parallel corpus from Debian packages "
                    "(downloaded with apt-get download, unpacked with dpkg-deb -x, never "
                    "installed) and Debian's translated package descriptions.")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help="work and output folder (default: %(default)s)")
    p.add_argument("--sources", default="all", metavar="LIST",
                   help="comma-separated subset of: %s (default: all)" % ",".join(cs.SOURCE_NAMES))
    p.add_argument("--no-update", action="store_true",
                   help="reuse the private apt lists already in the work folder "
                        "(no apt-get update; reproduces a previous run's package versions)")
    p.add_argument("--no-fetch", action="store_true",
                   help="use only what is already unpacked in the work folder; no apt at all")
    p.add_argument("--mirror", default=aptfetch.DEFAULT_MIRROR, metavar="URL",
                   help="Debian mirror (default: %(default)s)")
    p.add_argument("--security-mirror", default=aptfetch.DEFAULT_SECURITY_MIRROR, metavar="URL",
                   help="Debian security mirror (default: %(default)s)")
    args = p.parse_args(argv)
    if args.sources == "all":
        args.sources = list(cs.SOURCE_NAMES)
    else:
        chosen = [s.strip() for s in args.sources.split(",") if s.strip()]
        bad = [s for s in chosen if s not in cs.SOURCE_NAMES]
        if bad or not chosen:
            p.error("unknown source '%s'; choose from %s"
                    % (bad[0] if bad else "", ",".join(cs.SOURCE_NAMES)))
        args.sources = [s for s in cs.SOURCE_NAMES if s in chosen]
    return args


def main(argv=None):
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)   # progress before errors
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        stats, splits, sums = build(args.out, args.sources, fetch=not args.no_fetch,
                                    update=not args.no_update, mirror=args.mirror,
                                    security_mirror=args.security_mirror)
    except aptfetch.FetchError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    report(stats, splits, sums, os.path.abspath(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
