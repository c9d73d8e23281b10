"""A news site built on Wagtail (Django's most used CMS, from PyPI): the project a Wagtail user writes
(settings, one app of page models), knowing nothing of statekit. ``adapters/wagtail_site`` wraps it."""
