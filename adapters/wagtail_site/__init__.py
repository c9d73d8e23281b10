"""The Wagtail news site (``examples/wagtail_site``) as a statekit environment, on the public kit only.

A Django project wrapped as its users write them: ``PROJECT`` (the kit's ``DjangoProject``) sets the
project up once per process, here, before any of its models is imported (as ``django.setup()`` comes
first in any Django program), and points Django's connection at each world per thread.
"""

from statekit.kit import DjangoProject

PROJECT = DjangoProject("statekit_examples.apps.wagtail_site.settings")
PROJECT.setup()

from statekit_examples.adapters.wagtail_site.adapter import WagtailAdapter  # noqa: E402 - models need setup()

__all__ = ["PROJECT", "WagtailAdapter"]
