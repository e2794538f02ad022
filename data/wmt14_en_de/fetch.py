"""Resumable downloads with curl or wget, and archive verification (stdlib only).

A download goes to NAME.part and is renamed to NAME only once the archive
lists completely, so a file under its final name is always a verified one.
"""

import os
import re
import shutil
import subprocess
import tarfile


class Wmt14Error(Exception):
    """A user-facing failure: one sentence naming the file or URL at fault."""


def downloader():
    """'curl' or 'wget', whichever is installed (curl first), else None."""
    for tool in ("curl", "wget"):
        if shutil.which(tool):
            return tool
    return None


_LENGTH_RE = re.compile(r"^\s*content-length:\s*(\d+)\s*$", re.IGNORECASE | re.MULTILINE)


def remote_size(tool, url):
    """The server's Content-Length for url (after redirects), or None when unknown."""
    if tool == "curl":
        cmd = ["curl", "-fsSIL", "--max-time", "60", url]   # -f: a 404 page has no size for us
    else:
        cmd = ["wget", "--spider", "-S", "--timeout=60", url]   # -S: headers on stderr (-q would hide them)
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    # wget prints the headers on stderr; with redirects the last length is the file's.
    found = _LENGTH_RE.findall(r.stdout.decode("latin-1") + r.stderr.decode("latin-1"))
    return int(found[-1]) if found else None


def verify_archive(path, url=None):
    """List a .tgz to its end (what `tar -tzf` does); return {member name: size}.

    A truncated or corrupt archive raises Wmt14Error naming the file (and the
    URL it came from).
    """
    try:
        with tarfile.open(path, "r:gz") as tar:
            return {m.name: m.size for m in tar.getmembers() if m.isfile()}
    except (tarfile.TarError, EOFError, OSError, ValueError) as e:
        where = " (downloaded from %s; delete it to download it again)" % url if url else ""
        raise Wmt14Error("the archive %s is corrupt or truncated%s: %s" % (path, where, e))


def _fetch_cmd(tool, url, part):
    if tool == "curl":
        # -C -: continue where the .part ends; -f: an HTTP error is a failure, not a saved page.
        return ["curl", "-fL", "--retry", "3", "--retry-delay", "5", "-C", "-", "-o", part, url]
    return ["wget", "-c", "--tries=3", "--waitretry=5", "-O", part, url]


def download(url, path, tool, log=print):
    """Download url to path unless a verified copy of the right size is there.

    Resumes a partial NAME.part; checks the size against the server's
    Content-Length when the server gives one and lists the archive before
    renaming it into place.
    """
    part = path + ".part"
    size = remote_size(tool, url)
    if os.path.exists(path):
        have = os.path.getsize(path)
        if size is None or have == size:
            log("  %s: present (%d bytes)%s" % (os.path.basename(path), have,
                                                "" if size else "; the server gave no size"))
            return path
        log("  %s: %d bytes here but %d on the server: downloading again"
            % (os.path.basename(path), have, size))
        os.remove(path)
    if size is not None and os.path.exists(part) and os.path.getsize(part) > size:
        os.remove(part)                     # longer than the file: not a prefix of it
    if size is not None and os.path.exists(part) and os.path.getsize(part) == size:
        log("  %s: already downloaded, verifying" % os.path.basename(path))
    else:
        log("  %s: downloading %s%s" % (os.path.basename(path), url,
                                       " (%.1f MB)" % (size / 1e6) if size else ""))
        r = subprocess.run(_fetch_cmd(tool, url, part))
        if r.returncode != 0:
            raise Wmt14Error("downloading %s failed (%s exit status %d); run again to retry, "
                             "resuming from %s" % (url, tool, r.returncode, part))
    if size is not None and os.path.getsize(part) != size:
        raise Wmt14Error("downloading %s stopped at %d of %d bytes in %s; run again to resume"
                         % (url, os.path.getsize(part), size, part))
    try:
        verify_archive(part, url)
    except Wmt14Error:
        os.remove(part)                     # a corrupt prefix cannot be resumed
        raise
    os.replace(part, path)
    return path
