"""The fixed, named inputs of the local English-German corpus.

Changing any list here changes the corpus; keep them sorted.
"""

# Packages whose gettext catalogues (de/LC_MESSAGES/*.mo) are paired
# msgid -> msgstr.  Chosen from bookworm because each ships German .mo
# files in the package itself (or its -l10n/-locales/-common companion).
GETTEXT_PACKAGES = [
    "adduser",
    "appstream",
    "apt",
    "at-spi2-common",
    "bash",
    "binutils-common",
    "bison",
    "coreutils",
    "cpio",
    "debconf-i18n",
    "diffutils",
    "dpkg",
    "e2fsprogs-l10n",
    "findutils",
    "gawk",
    "gettext",
    "gettext-base",
    "git",
    "gnupg-l10n",
    "grep",
    "gsettings-desktop-schemas",
    "iso-codes",
    "krb5-locales",
    "libapt-pkg6.0",
    "libavahi-common-data",
    "libc-l10n",
    "libdpkg-perl",
    "libelf1",
    "libexif12",
    "libgdk-pixbuf2.0-common",
    "libglib2.0-data",
    "libgnutls30",
    "libgphoto2-l10n",
    "libgphoto2-port12",
    "libgstreamer-plugins-base1.0-0",
    "libgstreamer1.0-0",
    "libgtk-3-common",
    "libgtk-4-common",
    "libgtk2.0-common",
    "libidn2-0",
    "libpam-runtime",
    "libpq5",
    "libvisual-0.4-0",
    "libzvbi-common",
    "login",
    "make",
    "man-db",
    "nano",
    "net-tools",
    "packagekit",
    "polkitd",
    "postgresql-15",
    "postgresql-client-15",
    "procps",
    "psmisc",
    "python-apt-common",
    "sed",
    "shared-mime-info",
    "software-properties-common",
    "sudo",
    "systemd",
    "tar",
    "util-linux-locales",
    "vim-runtime",
    "wget",
    "xdg-user-dirs",
    "xkb-data",
    "xz-utils",
]

LIBREOFFICE_UI_PACKAGE = "libreoffice-l10n-de"
LIBREOFFICE_UI_DIR = "usr/lib/libreoffice/program/resource/de/LC_MESSAGES"

GCC_PACKAGE = "gcc-12-locales"
GCC_CATALOGUES = ["cpplib-12.mo", "gcc-12.mo"]

HELP_EN_PACKAGE = "libreoffice-help-en-us"
HELP_DE_PACKAGE = "libreoffice-help-de"
HELP_EN_DIR = "usr/share/libreoffice/help/en-US"
HELP_DE_DIR = "usr/share/libreoffice/help/de"

DING_PACKAGE = "trans-de-en"
DING_FILE = "usr/share/trans/de-en"

# Packages downloaded only for their copyright file: the
# /usr/share/doc/<pkg> of gcc-12-locales and debconf-i18n is a symlink to
# these packages' documentation.
LICENCE_ONLY_PACKAGES = {
    "gettext": ["debconf"],
    "gcc": ["gcc-12-base"],
}

# Source names, in priority order (the first source that yielded a pair is
# the one named for it in sources.tsv).
SOURCE_NAMES = [
    "gettext",
    "libreoffice-ui",
    "gcc",
    "libreoffice-help",
    "ding",
    "debian-descriptions",
]

SOURCE_PACKAGES = {
    "gettext": GETTEXT_PACKAGES,
    "libreoffice-ui": [LIBREOFFICE_UI_PACKAGE],
    "gcc": [GCC_PACKAGE],
    "libreoffice-help": [HELP_EN_PACKAGE, HELP_DE_PACKAGE],
    "ding": [DING_PACKAGE],
    "debian-descriptions": [],   # Translation-en/-de indexes via apt-get update
}

SOURCE_DESCRIPTIONS = {
    "gettext": "gettext catalogues (.mo) of %d common packages" % len(GETTEXT_PACKAGES),
    "libreoffice-ui": "LibreOffice user-interface catalogues (libreoffice-l10n-de)",
    "gcc": "GCC 12 diagnostics catalogues (gcc-12-locales)",
    "libreoffice-help": "LibreOffice help pages (libreoffice-help-en-us + libreoffice-help-de)",
    "ding": "Ding dictionary example sentences (trans-de-en)",
    "debian-descriptions": "Debian package descriptions (bookworm main Translation-en/-de)",
}


def packages_for(sources):
    """Sorted package names needed for the given sources (licence-only ones included)."""
    out = set()
    for s in sources:
        out.update(SOURCE_PACKAGES[s])
        out.update(LICENCE_ONLY_PACKAGES.get(s, []))
    return sorted(out)
