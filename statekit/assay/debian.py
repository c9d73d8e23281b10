"""Licences of the Debian packages in an image, from dpkg's status and each package's copyright file.

A machine-readable (DEP-5) copyright file names a licence per group of files; the package's licence
is all of them together (AND: which files a binary package holds is not recorded). Parsing is
debian-inspector's. An older free-text file is searched only for the references Debian Policy
(12.5) requires to ``/usr/share/common-licenses/NAME``; a free-text file with none states no licence
the assay can read. A package without its own copyright file (Policy allows its doc directory to be
a symlink to another binary package of the same source) uses a sibling's of the same source package.
The archive area comes from ``Section`` (``contrib/…``, ``non-free/…``; main has no prefix).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from statekit.assay import spdx
from statekit.assay.report import Shipped
from statekit.errors import ConfigError

STATUS = "var/lib/dpkg/status"
STATUS_DIR = "var/lib/dpkg/status.d/"
"""Distroless images keep one status file per package here instead."""
DOC = "usr/share/doc/"
NON_MAIN = ("contrib/", "non-free/", "non-free-firmware/")
_COMMON = re.compile(r"/usr/share/common-licenses/([A-Za-z][\w.+-]*)")


def wanted(path: str) -> bool:
    """The image files this module reads (paths as in a ``docker export`` tar: no leading slash)."""
    if path == STATUS or path.startswith(STATUS_DIR):
        return True
    return path.startswith(DOC) and path.endswith("/copyright") and path.count("/") == 4


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    source: str
    section: str


def installed(files: dict[str, bytes]) -> list[Package]:
    """Installed packages from dpkg's status database."""
    from debian_inspector import debcon

    texts = [files[p] for p in sorted(files) if p == STATUS or p.startswith(STATUS_DIR)]
    if not texts:
        raise ConfigError("the image has no dpkg status database (/var/lib/dpkg/status): is it Debian-based?")
    found: dict[str, Package] = {}
    for text in texts:
        for para in debcon.get_paragraphs_data(text.decode("utf-8", "replace")):
            if "installed" not in para.get("status", "install ok installed").split():
                continue
            name = para.get("package", "")
            source = (para.get("source") or name).split()[0]
            found[name] = Package(name, para.get("version", ""), source, para.get("section", ""))
    return sorted(found.values(), key=lambda p: p.name)


def licence_of(text: str) -> tuple[str | None, str]:
    """(licence expression, evidence) of one copyright file."""
    from debian_inspector.copyright import DebianCopyright

    parsed = DebianCopyright.from_text(text)
    if parsed.get_header() is None:
        names = sorted({name.rstrip(".") for name in _COMMON.findall(text)})  # a full stop ends a sentence
        if not names:
            return None, "free-text copyright file (no licence named by reference)"
        return spdx.combine([spdx.from_debian(n) for n in names]), "common-licenses references"
    synopses = []
    for paragraph in parsed.paragraphs:
        if type(paragraph).__name__ in ("CopyrightHeaderParagraph", "CopyrightFilesParagraph"):
            licence = getattr(paragraph, "license", None)
            if licence is not None and licence.name:
                synopses.append(licence.name.strip())
    if not synopses:
        return None, "DEP-5 file naming no licence"
    return spdx.combine([spdx.from_debian(s) for s in dict.fromkeys(synopses)]), "DEP-5"


def shipped(files: dict[str, bytes], doc_links: dict[str, str]) -> list[Shipped]:
    """Every installed package with the licence its copyright file states."""
    packages = installed(files)
    own: dict[str, str] = {}
    for package in packages:
        directory = doc_links.get(package.name, package.name)
        data = files.get(f"{DOC}{directory}/copyright")
        if data is not None:
            own[package.name] = data.decode("utf-8", "replace")
    by_source: dict[str, list[str]] = {}
    for package in packages:
        if package.name in own:
            by_source.setdefault(package.source, []).append(package.name)
    result = []
    for package in packages:
        main = not package.section.startswith(NON_MAIN)
        if package.name in own:
            licence, evidence = licence_of(own[package.name])
        elif by_source.get(package.source):
            sibling = by_source[package.source][0]
            licence, evidence = licence_of(own[sibling])
            evidence = f"{evidence}, of {sibling} (same source package {package.source})"
        else:
            licence, evidence = None, "no copyright file"
        result.append(Shipped("debian", package.name, package.version, licence, evidence, main))
    return result
