"""The site's pages: sections (an index of articles) and articles."""

from django.db import models
from wagtail.admin.panels import FieldPanel
from wagtail.fields import RichTextField
from wagtail.models import Page
from wagtail.search import index


class SectionPage(Page):
    """A section of the site (News, Events, Archive): its articles are its children."""

    intro = models.TextField(blank=True)
    subpage_types = ["news.ArticlePage"]
    content_panels = [*Page.content_panels, FieldPanel("intro")]


class ArticlePage(Page):
    """An article: a summary, a body and the day it is about."""

    date = models.DateField("article date")
    summary = models.CharField(max_length=250, blank=True)
    body = RichTextField(blank=True)
    parent_page_types = ["news.SectionPage"]
    content_panels = [*Page.content_panels, FieldPanel("date"), FieldPanel("summary"), FieldPanel("body")]
    search_fields = [*Page.search_fields, index.SearchField("summary"), index.SearchField("body")]
