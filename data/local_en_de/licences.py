"""Licence summaries from Debian copyright files (stdlib only)."""

import os
import re


def _dep5_licences(text):
    """Licence short names of a machine-readable (DEP-5) copyright file.

    The licence of the "Files: *" paragraph comes first, then the others
    in sorted order.
    """
    main = []
    others = set()
    for para in re.split(r"\n[ \t]*\n", text):
        files = re.search(r"^Files:[ \t]*(.*)$", para, re.MULTILINE)
        lic = re.search(r"^License:[ \t]*(.*)$", para, re.MULTILINE)
        if not files or not lic:
            continue
        name = lic.group(1).strip()
        if not name:
            continue
        if files.group(1).strip() == "*":
            if name not in main:
                main.append(name)
        else:
            others.add(name)
    return main + sorted(others - set(main))


_FREEFORM = [
    (re.compile(r"GNU (?:Lesser|Library) General Public License", re.I), "LGPL"),
    (re.compile(r"GNU General Public License|\bGPL\b", re.I), "GPL"),
    (re.compile(r"GNU Free Documentation License", re.I), "GFDL"),
    (re.compile(r"Mozilla Public License", re.I), "MPL"),
    (re.compile(r"Permission is hereby granted, free of charge", re.I), "MIT/X11-style"),
    (re.compile(r"Redistribution and use in source and binary forms", re.I), "BSD-style"),
    (re.compile(r"Apache License", re.I), "Apache"),
    (re.compile(r"public domain", re.I), "public-domain"),
]
_VERSION_RE = re.compile(r"version (\d+(?:\.\d+)?)", re.I)
_LATER_RE = re.compile(r"any later version", re.I)
_COMMON_RE = re.compile(r"common-licenses/([A-Za-z][A-Za-z0-9.+-]*[A-Za-z0-9+])")


def _freeform_licences(text):
    """Best-effort licence names of a free-form copyright file."""
    found = []
    for rx, label in _FREEFORM:
        for m in rx.finditer(text):
            name = label
            if label in ("GPL", "LGPL", "GFDL", "MPL"):
                window = text[m.end():m.end() + 250]
                v = _VERSION_RE.search(window)
                if v:
                    name = "%s-%s" % (label, v.group(1))
                    if _LATER_RE.search(window):
                        name += "+"
            found.append((m.start(), name))
    for m in _COMMON_RE.finditer(text):
        found.append((m.start(), m.group(1)))
    found.sort()
    out = []
    for _pos, name in found:
        if name not in out:
            out.append(name)
    # a versioned name makes the bare one redundant
    out = [n for n in out if not (n in ("GPL", "LGPL", "GFDL", "MPL")
                                  and any(x.startswith(n + "-") for x in out))]
    return out


def licences_of(text):
    """(licence names, machine_readable) of a copyright file's text."""
    if re.match(r"Format:\s*https?://", text):
        names = _dep5_licences(text)
        if names:
            return names, True
    return _freeform_licences(text), False


def copyright_file(pkgs_root, pkg):
    """Path of pkg's copyright file in the unpacked tree, following a
    /usr/share/doc/<pkg> symlink to another unpacked package, or None."""
    doc = os.path.join(pkgs_root, pkg, "usr", "share", "doc", pkg)
    if os.path.islink(doc):
        target = os.path.basename(os.readlink(doc).rstrip("/"))
        alt = os.path.join(pkgs_root, target, "usr", "share", "doc", target, "copyright")
        return alt if os.path.isfile(alt) else None
    path = os.path.join(doc, "copyright")
    return path if os.path.isfile(path) else None
