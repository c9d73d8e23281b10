"""``statekit assay``: may this environment ship? Licences, fixture sources, recorded traffic.

One concept per module: ``spdx`` (licence names to SPDX expressions and categories), ``python_dists``
(licences of Python distributions), ``debian`` (licences of an image's Debian packages), ``image``
(reading an image's files without running it), ``fixtures`` (whose data is seeded), ``traffic``
(provenance of recorded hosts), ``leaks`` (credentials and personal data in cassettes), ``policy``
(what a team accepts), ``report`` (the result) and ``render`` (table and JSON), orchestrated by
``run.assay``. This package imports nothing heavy until an assay runs.
"""
