"""Fetching Debian packages and translation indexes into a private folder.

Everything goes through a private apt configuration under WORK/apt: its own
sources list, lists, cache, an empty parts folder (so the machine's
/etc/apt/apt.conf.d settings, e.g. Acquire::Languages "none", do not apply)
and Acquire::Languages {"en"; "de";}.  Nothing outside WORK is written:
packages are downloaded with `apt-get download` and unpacked with
`dpkg-deb -x`, never installed.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys

SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


class FetchError(RuntimeError):
    """A one-sentence, user-facing error."""


def need_tool(name):
    if shutil.which(name) is None:
        raise FetchError("the tool '%s' is missing; install it with apt-get "
                         "(it is part of a standard Debian system)" % name)


def _conf_quote(s):
    return '"%s"' % s.replace('"', '\\"')


def write_apt_config(work, mirror=DEFAULT_MIRROR, security_mirror=DEFAULT_SECURITY_MIRROR):
    """Create WORK/apt and return the path of its apt.conf."""
    apt = os.path.join(work, "apt")
    for sub in ("lists/partial", "cache/archives/partial", "parts",
                "sources.list.d", "preferences.d", "trusted.gpg.d", "log"):
        os.makedirs(os.path.join(apt, sub), exist_ok=True)
    if not os.path.exists(KEYRING):
        raise FetchError("the Debian archive keyring %s is missing; install the "
                         "package debian-archive-keyring" % KEYRING)
    sources = (
        "deb [signed-by={k}] {m} {s} main\n"
        "deb [signed-by={k}] {m} {s}-updates main\n"
        "deb [signed-by={k}] {sm} {s}-security main\n"
    ).format(k=KEYRING, m=mirror, sm=security_mirror, s=SUITE)
    with open(os.path.join(apt, "sources.list"), "w") as f:
        f.write(sources)
    lines = [
        "Dir::State %s;" % _conf_quote(os.path.join(apt, "state")),
        "Dir::State::Lists %s;" % _conf_quote(os.path.join(apt, "lists")),
        'Dir::State::status "/var/lib/dpkg/status";',
        "Dir::Cache %s;" % _conf_quote(os.path.join(apt, "cache")),
        'Dir::Cache::pkgcache "";',
        'Dir::Cache::srcpkgcache "";',
        "Dir::Etc::sourcelist %s;" % _conf_quote(os.path.join(apt, "sources.list")),
        "Dir::Etc::sourceparts %s;" % _conf_quote(os.path.join(apt, "sources.list.d")),
        "Dir::Etc::parts %s;" % _conf_quote(os.path.join(apt, "parts")),
        "Dir::Etc::main %s;" % _conf_quote(os.path.join(apt, "apt.conf.main")),
        "Dir::Etc::preferences %s;" % _conf_quote(os.path.join(apt, "preferences")),
        "Dir::Etc::preferencesparts %s;" % _conf_quote(os.path.join(apt, "preferences.d")),
        "Dir::Etc::trustedparts %s;" % _conf_quote(os.path.join(apt, "trusted.gpg.d")),
        "Dir::Log %s;" % _conf_quote(os.path.join(apt, "log")),
        'Acquire::Languages { "en"; "de"; };',
        'Acquire::GzipIndexes "false";',
        'Acquire::Check-Valid-Until "false";',
        'Acquire::Check-Date "false";',
        'Acquire::Retries "3";',
        'APT::Get::List-Cleanup "true";',
    ]
    if os.geteuid() == 0:
        # root may drop to _apt, which cannot write into a private folder
        lines.append('APT::Sandbox::User "root";')
    os.makedirs(os.path.join(apt, "state"), exist_ok=True)
    conf = os.path.join(apt, "apt.conf")
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    return conf


def _run(cmd, conf, cwd=None):
    env = dict(os.environ)
    env["APT_CONFIG"] = conf
    env["LC_ALL"] = "C"
    env["DEBIAN_FRONTEND"] = "noninteractive"
    return subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True)


def apt_update(conf, log=print):
    need_tool("apt-get")
    log("apt-get update (private configuration, %s main + updates + security)" % SUITE)
    r = _run(["apt-get", "update"], conf)
    lines = r.stdout.splitlines() + r.stderr.splitlines()
    errs = [ln[3:].strip() for ln in lines if ln.startswith("E:")]
    errs += [ln.strip() for ln in lines if ln.startswith(("Err:", "W: Failed", "W: Some index"))]
    if r.returncode != 0 or errs:
        raise FetchError("apt-get update with the private configuration failed (%s)"
                         % (errs[0] if errs else r.stderr.strip()[-300:]))


def translation_file(work, lang):
    """Path of the bookworm main Translation-LANG index in the private lists."""
    lists = os.path.join(work, "apt", "lists")
    if not os.path.isdir(lists):
        return None
    suffix = "_dists_%s_main_i18n_Translation-%s" % (SUITE, lang)
    for fn in sorted(os.listdir(lists)):
        base = re.sub(r"\.(gz|xz|bz2|lz4|zst)$", "", fn)
        if base.endswith(suffix):
            return os.path.join(lists, fn)
    return None


def read_index(path):
    """Text of a (possibly compressed) apt index file."""
    if path.endswith(".gz"):
        import gzip
        opener = gzip.open
    elif path.endswith(".xz"):
        import lzma
        opener = lzma.open
    elif path.endswith(".bz2"):
        import bz2
        opener = bz2.open
    else:
        opener = open
    with opener(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


_URI_LINE_RE = re.compile(r"^'([^']+)' (\S+) (\d+) (\S+)$")


def print_uris(conf, packages):
    """{package: (uri, filename, size, 'SHA256:..')} from apt-get download --print-uris."""
    r = _run(["apt-get", "download", "--print-uris"] + list(packages), conf)
    if r.returncode != 0:
        m = re.search(r"Unable to locate package (\S+)", r.stderr)
        if m:
            raise FetchError("cannot download package '%s': apt cannot find it in %s main"
                             % (m.group(1), SUITE))
        m = re.search(r"Package '?([^' ]+)'? has no installation candidate", r.stderr)
        if m:
            raise FetchError("cannot download package '%s': it has no candidate version"
                             % m.group(1))
        raise FetchError("apt-get download --print-uris failed: %s" % r.stderr.strip()[-300:])
    out = {}
    for line in r.stdout.splitlines():
        m = _URI_LINE_RE.match(line.strip())
        if not m:
            continue
        fn = m.group(2)
        pkg = fn.split("_", 1)[0]
        out[pkg] = (m.group(1), fn, int(m.group(3)), m.group(4))
    for p in packages:
        if p not in out:
            raise FetchError("cannot download package '%s': apt gave no download address for it" % p)
    return out


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _file_ok(path, size, digest):
    if not os.path.isfile(path) or os.path.getsize(path) != size:
        return False
    if digest.upper().startswith("SHA256:"):
        return _sha256(path) == digest.split(":", 1)[1].lower()
    return True


def download(conf, work, packages, log=print):
    """Download the packages' .deb files into WORK/debs, reusing good ones.

    Returns {package: path of its .deb}.
    """
    need_tool("apt-get")
    debs = os.path.join(work, "debs")
    os.makedirs(debs, exist_ok=True)
    uris = print_uris(conf, sorted(packages))
    missing = []
    result = {}
    for pkg in sorted(uris):
        _uri, fn, size, digest = uris[pkg]
        path = os.path.join(debs, fn)
        result[pkg] = path
        if not _file_ok(path, size, digest):
            missing.append(pkg)
    # forget other versions of the same packages
    wanted = set(os.path.basename(p) for p in result.values())
    for fn in sorted(os.listdir(debs)):
        if fn.endswith(".deb") and fn not in wanted and fn.split("_", 1)[0] in result:
            os.remove(os.path.join(debs, fn))
    log("packages: %d needed, %d already in %s, %d to download"
        % (len(result), len(result) - len(missing), debs, len(missing)))
    if missing:
        r = _run(["apt-get", "download"] + missing, conf, cwd=debs)
        if r.returncode != 0:
            bad = None
            m = re.search(r"Failed to fetch \S*/([^/\s]+\.deb)", r.stderr)
            if m:
                bad = m.group(1).split("_", 1)[0]
            raise FetchError("cannot download package '%s': %s"
                             % (bad or " ".join(missing), r.stderr.strip().splitlines()[-1]
                                if r.stderr.strip() else "apt-get download failed"))
        for pkg in missing:
            _uri, fn, size, digest = uris[pkg]
            if not _file_ok(result[pkg], size, digest):
                raise FetchError("cannot download package '%s': the file %s is missing "
                                 "or does not match its checksum" % (pkg, fn))
    return result


def extract(work, debs, log=print):
    """dpkg-deb -x each .deb into WORK/pkgs/<package>, unless already done.

    A stamp file WORK/pkgs/<package>.stamp names the .deb it came from.
    """
    need_tool("dpkg-deb")
    root = os.path.join(work, "pkgs")
    os.makedirs(root, exist_ok=True)
    done = 0
    for pkg in sorted(debs):
        deb = debs[pkg]
        stamp = os.path.join(root, pkg + ".stamp")
        dest = os.path.join(root, pkg)
        name = os.path.basename(deb)
        if os.path.isdir(dest) and os.path.isfile(stamp):
            with open(stamp) as f:
                if f.read().strip() == name:
                    continue
        tmp = dest + ".partial"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(tmp)
        r = subprocess.run(["dpkg-deb", "-x", deb, tmp], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        if r.returncode != 0:
            raise FetchError("cannot unpack package '%s' (%s): %s"
                             % (pkg, name, r.stderr.strip()[-200:]))
        os.rename(tmp, dest)
        with open(stamp, "w") as f:
            f.write(name + "\n")
        done += 1
    log("unpacked %d package(s), %d reused, into %s" % (done, len(debs) - done, root))


def deb_version(work, pkg):
    """Version of an unpacked package, from its stamp (the .deb file name)."""
    stamp = os.path.join(work, "pkgs", pkg + ".stamp")
    if not os.path.isfile(stamp):
        return "?"
    with open(stamp) as f:
        name = f.read().strip()
    parts = name.split("_")
    if len(parts) >= 3:
        return parts[1].replace("%3a", ":")
    return "?"


if __name__ == "__main__":
    sys.exit("this module is used by build_corpus.py")
