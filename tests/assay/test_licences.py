"""Licence names from Python metadata and Debian copyright files, normalised and judged."""

from __future__ import annotations

import email.parser

import pytest

from statekit.assay import debian, python_dists, spdx
from statekit.assay.image import DIST_METADATA
from statekit.assay.policy import Policy
from statekit.assay.report import Shipped
from statekit.errors import ConfigError


def metadata(*headers: str) -> object:
    return email.parser.Parser().parsestr("\n".join(["Name: pkg", "Version: 1.0", *headers]) + "\n\n")


@pytest.mark.parametrize(
    ("headers", "licence", "evidence"),
    [
        (["License-Expression: mit OR apache-2.0"], "MIT OR Apache-2.0", "License-Expression"),
        (
            ["License: BSD-3-Clause", "Classifier: License :: OSI Approved :: MIT License"],
            "BSD-3-Clause",
            "License",
        ),
        (
            ["License: MIT License", "Classifier: License :: OSI Approved :: MIT License"],
            "MIT",
            "classifiers",
        ),
        (
            ["License: UNKNOWN", "Classifier: License :: OSI Approved :: BSD License"],
            "LicenseRef-classifier-BSD",
            "classifiers",
        ),
        (
            ["License: Copyright ACME, all rights reserved"],
            "LicenseRef-metadata-Copyright-ACME-all-rights-reserved",
            "License (free text)",
        ),
        ([], None, "no licence metadata"),
    ],
)
def test_python_metadata_is_read_best_evidence_first(
    headers: list[str], licence: str | None, evidence: str
) -> None:
    assert python_dists.licence_of(metadata(*headers)) == (licence, evidence)


@pytest.mark.parametrize(
    ("synopsis", "expected"),
    [
        ("GPL-2+", "GPL-2.0-or-later"),
        ("LGPL-2.1", "LGPL-2.1-only"),
        ("Expat", "MIT"),
        ("Apache-2", "Apache-2.0"),
        ("GFDL-NIV-1.3+", "GFDL-1.3-no-invariants-or-later"),
        ("GPL-2+ with Autoconf exception", "GPL-2.0-or-later"),
        ("GPL-1+ or Artistic, and BSD-3-clause", "(GPL-1.0-or-later OR Artistic-1.0-Perl) AND BSD-3-Clause"),
        ("BSD-3-clause and/or GPL-3+", "BSD-3-Clause AND GPL-3.0-or-later"),
        ("permissive-fsf", "LicenseRef-debian-permissive-fsf"),
    ],
)
def test_debian_short_names_become_spdx(synopsis: str, expected: str) -> None:
    assert spdx.from_debian(synopsis) == expected


def judge(licence: str | None, *, main: bool = False, policy: Policy | None = None) -> tuple[str, str]:
    component = (policy or Policy.load()).judge(
        Shipped("debian" if main else "python", "x", "1", licence, "test", main)
    )
    return component.verdict, component.reason


def test_three_valued_logic_over_expressions() -> None:
    assert judge("MIT OR LicenseRef-scancode-proprietary-license")[0] == "yes", (
        "a choice with one good licence is fine"
    )
    assert judge("MIT AND LicenseRef-scancode-proprietary-license")[0] == "no", (
        "every licence of an AND must be fine"
    )
    assert judge("MIT AND LicenseRef-debian-odd")[0] == "unknown"
    assert judge("LicenseRef-scancode-proprietary-license OR LicenseRef-debian-odd")[0] == "unknown"
    assert judge(None)[0] == "unknown"


def test_debian_main_answers_for_names_outside_spdx_but_never_overrides_a_rejection(tmp_path) -> None:
    assert judge("GPL-2.0-only AND LicenseRef-debian-odd", main=True) == (
        "yes",
        "LicenseRef-debian-odd: no SPDX id; accepted as a package of Debian main (DFSG-free)",
    )
    assert judge("LicenseRef-debian-odd", main=False)[0] == "unknown", (
        "contrib and non-free get no such trust"
    )
    assert judge("LicenseRef-scancode-proprietary-license", main=True)[0] == "no"
    strict = tmp_path / "strict.toml"
    strict.write_text("[debian]\ntrust_main = false\n")
    assert judge("LicenseRef-debian-odd", main=True, policy=Policy.load(strict))[0] == "unknown"


def test_a_clarification_answers_for_one_version_only(tmp_path) -> None:
    path = tmp_path / "team.toml"
    path.write_text(
        '[[clarify]]\ncomponent = "python:x"\nversion = "1"\n'
        'licence = "MIT"\nreason = "LICENSE read by hand"\n'
    )
    policy = Policy.load(path)
    clarified = policy.judge(Shipped("python", "x", "1", None, "no licence metadata"))
    assert (clarified.verdict, clarified.licence, clarified.evidence) == (
        "yes",
        "MIT",
        "policy clarification: LICENSE read by hand",
    )
    assert policy.judge(Shipped("python", "x", "2", None, "no licence metadata")).verdict == "unknown"


def test_a_bad_clarification_is_refused(tmp_path) -> None:
    path = tmp_path / "team.toml"
    path.write_text('[[clarify]]\ncomponent = "python:x"\nlicence = "MIT"\n')
    with pytest.raises(ConfigError, match="needs component, licence and reason"):
        Policy.load(path)


DEP5 = """Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: tool
License: GPL-2+

Files: *
Copyright: 2020 Someone
License: GPL-2+

Files: lib/*
Copyright: 2021 Other
License: Expat or Apache-2.0

License: GPL-2+
 This program is free software; you can redistribute it.
"""

FREE_TEXT = """This is the Debian prepackaged version of tool.
Copyright 2001 Somebody. Licensed under the GNU LGPL version 2.1 or later;
see /usr/share/common-licenses/LGPL-2.1. The manual is under /usr/share/common-licenses/GFDL-1.3.
"""

STATUS = """Package: tool
Status: install ok installed
Section: utils
Version: 1.0-1

Package: libtool-data
Status: install ok installed
Section: libs
Source: tool (1.0-1)
Version: 1.0-1

Package: firmware-blob
Status: install ok installed
Section: non-free-firmware/kernel
Version: 3

Package: removed
Status: deinstall ok config-files
Section: utils
Version: 0.1
"""


def test_dep5_files_are_read_whole_and_free_text_by_its_references() -> None:
    assert debian.licence_of(DEP5) == ("GPL-2.0-or-later AND (Apache-2.0 OR MIT)", "DEP-5")
    assert debian.licence_of(FREE_TEXT) == ("GFDL-1.3-only AND LGPL-2.1-only", "common-licenses references")
    assert debian.licence_of("Copyright 1999 A. Person. Do what you like.") == (
        None,
        "free-text copyright file (no licence named by reference)",
    )


def test_packages_without_a_copyright_file_use_their_source_siblings() -> None:
    files = {
        debian.STATUS: STATUS.encode(),
        "usr/share/doc/tool/copyright": DEP5.encode(),
    }
    shipped = {s.name: s for s in debian.shipped(files, doc_links={})}
    assert set(shipped) == {"tool", "libtool-data", "firmware-blob"}, "only installed packages"
    assert shipped["libtool-data"].licence == shipped["tool"].licence
    assert shipped["libtool-data"].evidence == "DEP-5, of tool (same source package tool)"
    assert shipped["firmware-blob"].licence is None and not shipped["firmware-blob"].debian_main
    assert shipped["tool"].debian_main
    verdicts = {c.name: c.verdict for c in map(Policy.load().judge, shipped.values())}
    assert verdicts == {"tool": "yes", "libtool-data": "yes", "firmware-blob": "unknown"}


@pytest.mark.parametrize(
    ("path", "read"),
    [
        ("opt/venv/lib/python3.11/site-packages/a-1.dist-info/METADATA", True),
        ("usr/local/lib/python3.11/dist-packages/b-1.dist-info/METADATA", True),  # Debian's pip
        ("usr/lib/python3/dist-packages/c-1.dist-info/METADATA", False),  # dpkg's: counted as Debian
        ("opt/venv/lib/python3.11/site-packages/a-1.dist-info/RECORD", False),
    ],
)
def test_which_wheels_of_an_image_count(path: str, read: bool) -> None:
    assert bool(DIST_METADATA.fullmatch(path)) is read


def test_an_image_without_dpkg_is_refused_plainly() -> None:
    with pytest.raises(ConfigError, match="no dpkg status database"):
        debian.shipped({}, doc_links={})
