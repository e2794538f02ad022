"""Reading GNU gettext .mo catalogues (stdlib only).

The format (GNU gettext manual, "The Format of GNU MO Files"):
magic, revision, N, offset of the msgid table, offset of the msgstr table,
then N (length, offset) pairs in each table.  A msgid may carry a context
("CTX\\x04MSGID") and plural forms ("SINGULAR\\x00PLURAL"); a msgstr of a
plural entry holds the forms separated by NUL.
"""

import re
import struct

MAGIC_LE = 0x950412DE
MAGIC_BE = 0xDE120495


class MoError(ValueError):
    """The file is not a readable .mo catalogue."""


def _raw_entries(data):
    if len(data) < 20:
        raise MoError("file too short for a .mo header")
    magic = struct.unpack("<I", data[:4])[0]
    if magic == MAGIC_LE:
        end = "<"
    elif magic == MAGIC_BE:
        end = ">"
    else:
        raise MoError("bad magic number 0x%08x" % magic)
    _rev, count, orig_off, trans_off = struct.unpack(end + "4I", data[4:20])
    entries = []
    for i in range(count):
        olen, opos = struct.unpack(end + "2I", data[orig_off + 8 * i:orig_off + 8 * i + 8])
        tlen, tpos = struct.unpack(end + "2I", data[trans_off + 8 * i:trans_off + 8 * i + 8])
        if opos + olen > len(data) or tpos + tlen > len(data):
            raise MoError("string table points past the end of the file")
        entries.append((data[opos:opos + olen], data[tpos:tpos + tlen]))
    return entries


_CHARSET_RE = re.compile(rb"charset=([A-Za-z0-9_.:-]+)", re.IGNORECASE)


def header_charset(header_bytes):
    """The charset named in a .mo header, or None."""
    m = _CHARSET_RE.search(header_bytes)
    if not m:
        return None
    name = m.group(1).decode("ascii", "replace").strip()
    if name.upper() in ("CHARSET", ""):
        return None
    try:
        import codecs
        codecs.lookup(name)
    except LookupError:
        return None
    return name


def _decode(raw, charsets):
    for cs in charsets:
        if cs is None:
            continue
        try:
            return raw.decode(cs)
        except (UnicodeDecodeError, LookupError):
            continue
    return raw.decode("latin-1")


def read_mo_pairs(data):
    """Return [(msgid, msgstr)] from the bytes of a .mo file.

    - the header entry (empty msgid) is used only for its charset;
    - the msgctxt is dropped;
    - for plurals the singular msgid is paired with msgstr[0];
    - entries with an empty translation are skipped.
    Order is the catalogue's order (sorted by raw msgid, as msgfmt writes).
    """
    entries = _raw_entries(data)
    charset = None
    for mid, mstr in entries:
        if mid == b"":
            charset = header_charset(mstr)
            break
    str_charsets = [charset, "utf-8", "latin-1"]
    id_charsets = ["utf-8", charset, "latin-1"]
    pairs = []
    for mid, mstr in entries:
        if mid == b"":
            continue
        if b"\x04" in mid:
            mid = mid.split(b"\x04", 1)[1]
        mid = mid.split(b"\x00", 1)[0]
        mstr = mstr.split(b"\x00", 1)[0]
        if not mid or not mstr:
            continue
        pairs.append((_decode(mid, id_charsets), _decode(mstr, str_charsets)))
    return pairs


def write_mo(entries, charset="UTF-8", header=True):
    """Build the bytes of a little-endian .mo file (used by the tests).

    entries: list of (msgid, msgstr) str pairs; msgid may contain
    "ctx\\x04id" and "sing\\x00plural", msgstr "s0\\x00s1".
    With header=True a header entry naming `charset` is added.
    """
    items = list(entries)
    if header:
        items.insert(0, ("", "Content-Type: text/plain; charset=%s\n" % charset))
    enc = [(k.encode(charset), v.encode(charset)) for k, v in items]
    enc.sort(key=lambda kv: kv[0])
    n = len(enc)
    orig_off = 28
    trans_off = orig_off + 8 * n
    data_off = trans_off + 8 * n
    blob = b""
    otab = []
    for k, _v in enc:
        otab.append((len(k), data_off + len(blob)))
        blob += k + b"\x00"
    ttab = []
    for _k, v in enc:
        ttab.append((len(v), data_off + len(blob)))
        blob += v + b"\x00"
    out = struct.pack("<7I", MAGIC_LE, 0, n, orig_off, trans_off, 0, 0)
    for ln, pos in otab:
        out += struct.pack("<2I", ln, pos)
    for ln, pos in ttab:
        out += struct.pack("<2I", ln, pos)
    return out + blob
