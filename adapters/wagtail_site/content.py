"""A seed's content for the news site, written through Wagtail's own API (pages added to the tree,
revisions saved and published by an editor), with the history a site has: articles published over
the last months, some since edited and waiting as drafts, a few titles misspelt.

The build runs under statekit's virtual clock and starts at the seed's epoch: it moves the clock back
first and forward article by article, so every stamp lies before the episodes' start."""

from __future__ import annotations

import random
from datetime import timedelta

from django.contrib.auth.models import Group, User
from django.utils import timezone
from wagtail.models import Page

from statekit.kit import clock
from statekit_examples.apps.wagtail_site.news.models import ArticlePage, SectionPage

EDITOR = "editor"
SECTIONS = ("News", "Events", "Sport")
ARCHIVE = "Archive"
HISTORY_DAYS = 120
SUBJECTS = (
    "council",
    "library",
    "harbour",
    "school",
    "market",
    "museum",
    "railway",
    "hospital",
    "park",
    "bridge",
    "festival",
    "orchestra",
    "stadium",
    "garden",
    "theatre",
    "airport",
)
EVENTS = (
    "opens new wing",
    "budget approved",
    "reopens after repairs",
    "wins regional award",
    "announces summer programme",
    "plans expansion",
    "welcomes new director",
    "marks anniversary",
    "hosts open day",
    "faces delays",
)
TYPOS = {  # a word as it should be, and as a hurried editor typed it
    "council": "concil",
    "library": "libary",
    "harbour": "harbor",
    "museum": "musuem",
    "railway": "railwya",
    "hospital": "hopsital",
    "festival": "festivel",
    "theatre": "theatr",
    "budget": "budjet",
    "expansion": "expension",
    "anniversary": "anniversery",
    "director": "directer",
}


def fill(seed: int) -> None:
    """Build seed ``seed``'s site under the home page Wagtail's migrations made: an editor, the
    sections and an archive, 5-8 articles per section published over ``HISTORY_DAYS`` days, 2-3 of
    them edited since (a draft waits), 1-2 titles misspelt."""
    draw = random.Random(f"wagtail-site:{seed}")
    clock().advance(-timedelta(days=HISTORY_DAYS))  # the site's history lies before the episodes
    editor = User.objects.create_user(EDITOR, f"{EDITOR}@news.example", first_name="Eda", last_name="Tor")
    editor.groups.add(Group.objects.get(name="Moderators"))  # Wagtail's own group: edit, publish, move
    home = Page.objects.get(depth=2)
    sections = {
        name: _add(
            home, SectionPage(title=name, slug=name.lower(), intro=f"{name} from around town."), editor
        )
        for name in (*SECTIONS, ARCHIVE)
    }
    stories = [
        (name, draw.choice(SUBJECTS), draw.choice(EVENTS))
        for name in SECTIONS
        for _ in range(draw.randint(5, 8))
    ]
    draw.shuffle(stories)
    days = sorted(draw.sample(range(1, HISTORY_DAYS), len(stories)), reverse=True)
    typed = [i for i, (_, subject, event) in enumerate(stories) if _typo_words(f"{subject} {event}")]
    misspelt = set(draw.sample(typed, min(len(typed), draw.randint(1, 2))))
    elapsed = 0
    for index, ((section, subject, event), day) in enumerate(zip(stories, days, strict=True)):
        clock().advance(timedelta(days=HISTORY_DAYS - day - elapsed))
        elapsed = HISTORY_DAYS - day
        title = f"{subject.capitalize()} {event}"
        if index in misspelt:
            title = _misspell(title, draw)
        article = ArticlePage(
            title=title,
            slug=f"{subject}-{index}",
            date=timezone.now().date(),
            summary=f"The {subject} {event}.",
            body=f"<p>The town's {subject} {event}, officials said on day {index}.</p>",
        )
        _add(sections[section], article, editor)
    drafts = draw.sample(sorted(ArticlePage.objects.values_list("id", flat=True)), draw.randint(2, 3))
    clock().advance(timedelta(days=HISTORY_DAYS - elapsed - 1))  # yesterday: the edits waiting
    for page_id in drafts:
        draft = ArticlePage.objects.get(id=page_id).get_latest_revision_as_object()
        draft.summary = f"{draft.summary} Updated with reactions."
        draft.save_revision(user=editor)


def _add(parent: Page, page: Page, editor: User) -> Page:
    """``page`` added under ``parent``, saved as a revision and published, as the editor does it."""
    parent.add_child(instance=page)
    page.save_revision(user=editor).publish(user=editor)
    return page


def _misspell(title: str, draw: random.Random) -> str:
    """``title`` with one of its words (one ``TYPOS`` knows) misspelt."""
    words = title.split(" ")
    i = draw.choice(_typo_words(title))
    typo = TYPOS[words[i].lower()]
    words[i] = typo.capitalize() if words[i][0].isupper() else typo
    return " ".join(words)


def _typo_words(title: str) -> list[int]:
    """The positions of ``title``'s words that ``TYPOS`` can misspell."""
    return [i for i, word in enumerate(title.split(" ")) if word.lower() in TYPOS]
