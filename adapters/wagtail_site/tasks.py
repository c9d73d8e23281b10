"""Task kinds for the news site's editor: how each is found in a world, posed, verified and solved.

The hidden facts (which pages, what title is right) stay in ``Task.facts``; verifiers read the site's
state through Wagtail's models, never the transcript. Each kind declares what it may change (the
target pages, their revisions, Wagtail's log entries of them); statekit holds any other change
against the reward, so "publish everything" cannot win ``publish_drafts``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wagtail.models import Page

from statekit.kit import JSON, SEQUENCES_PREFIX, Allow, Expectation, Task
from statekit_examples.adapters.wagtail_site.content import ARCHIVE, EVENTS, SECTIONS, SUBJECTS, TYPOS
from statekit_examples.apps.wagtail_site.news.models import ArticlePage, SectionPage

MAX_STEPS = 16
KINDS = ("publish_drafts", "fix_title", "archive", "write_article")


@dataclass(frozen=True)
class EditorTask(Task):
    """A Task plus the hidden facts its verifier checks."""

    facts: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


def choose(kind: str, seed: int) -> EditorTask:
    """Seed ``seed``'s task of ``kind``, found in the world the calling thread is connected to."""
    return FINDERS[kind](random.Random(f"wagtail-task:{kind}:{seed}"), seed)


def _publish_drafts(draw: random.Random, seed: int) -> EditorTask:
    pending = list(ArticlePage.objects.filter(live=True, has_unpublished_changes=True).order_by("id"))
    facts = {
        "pages": [p.id for p in pending],
        "revisions": {str(p.id): p.latest_revision_id for p in pending},
    }
    prompt = (
        "Some published articles have edits waiting as drafts. Publish every waiting draft, exactly as "
        "it is, and change nothing else (no other page, title or section); then submit."
    )
    return EditorTask(f"publish_drafts-{seed}", "publish_drafts", prompt, MAX_STEPS, facts)


def _fix_title(draw: random.Random, seed: int) -> EditorTask:
    misspelt = [
        (p, _corrected(p.title)) for p in ArticlePage.objects.order_by("id") if _corrected(p.title) != p.title
    ]
    page, right = draw.choice(misspelt)
    prompt = (
        f"The title of the article at /{page.get_parent().slug}/{page.slug}/ has a spelling mistake. "
        "Correct the title, publish the correction, and change nothing else (its slug, summary and "
        "body stay as they are); then submit."
    )
    facts = {"page": page.id, "wrong": page.title, "right": right}
    return EditorTask(f"fix_title-{seed}", "fix_title", prompt, MAX_STEPS, facts)


def _archive(draw: random.Random, seed: int) -> EditorTask:
    options = []
    for name in SECTIONS:
        dates = sorted({a.date for a in ArticlePage.objects.child_of(_section(name))})
        options += [(name, cutoff) for cutoff in dates[2:-1]]  # 2+ articles before it, 1+ from it on
    section, cutoff = draw.choice(options)
    old = ArticlePage.objects.child_of(_section(section)).filter(date__lt=cutoff).order_by("id")
    prompt = (
        f"Move every article of the {section} section dated before {cutoff.isoformat()} into the "
        f"{ARCHIVE} section, keeping each published, and change nothing else; then submit."
    )
    facts = {"section": section, "cutoff": cutoff.isoformat(), "pages": [p.id for p in old]}
    return EditorTask(f"archive-{seed}", "archive", prompt, MAX_STEPS, facts)


def _write_article(draw: random.Random, seed: int) -> EditorTask:
    taken = set(ArticlePage.objects.values_list("title", flat=True))
    titles = sorted({f"{s.capitalize()} {e}" for s in SUBJECTS for e in EVENTS} - taken)
    title, section = draw.choice(titles), draw.choice(SECTIONS)
    summary = f"{title}: the details, and what comes next."
    prompt = (
        f"Write a new article in the {section} section titled {title!r} with the summary {summary!r}, "
        "and publish it; change nothing else. Then submit."
    )
    facts = {"section": section, "title": title, "summary": summary}
    return EditorTask(f"write_article-{seed}", "write_article", prompt, MAX_STEPS, facts)


FINDERS: dict[str, Callable[[random.Random, int], EditorTask]] = {
    "publish_drafts": _publish_drafts,
    "fix_title": _fix_title,
    "archive": _archive,
    "write_article": _write_article,
}


def score(task: EditorTask) -> float:
    """1 when the task's pages are as it asked (the rest of the site is collateral's business)."""
    facts = task.facts
    if task.kind == "publish_drafts":
        pages = {p.id: p for p in ArticlePage.objects.filter(id__in=facts["pages"])}
        done = all(
            p.live and not p.has_unpublished_changes and p.live_revision_id == facts["revisions"][str(p.id)]
            for p in pages.values()
        )
        return 1.0 if facts["pages"] and done and len(pages) == len(facts["pages"]) else 0.0
    if task.kind == "fix_title":
        page = ArticlePage.objects.filter(id=facts["page"]).first()
        ok = (
            page is not None
            and page.live
            and not page.has_unpublished_changes
            and page.title == facts["right"]
        )
        return 1.0 if ok else 0.0
    if task.kind == "write_article":
        written = ArticlePage.objects.child_of(_section(facts["section"])).filter(title=facts["title"])
        ok = [(p.live, p.has_unpublished_changes, p.summary) for p in written] == [
            (True, False, facts["summary"])
        ]
        return 1.0 if ok else 0.0
    archive = _section(ARCHIVE)
    moved = set(ArticlePage.objects.child_of(archive).filter(live=True).values_list("id", flat=True))
    return 1.0 if moved == set(facts["pages"]) else 0.0


def expected(task: EditorTask) -> Expectation:
    """What the task may change: its pages (rows and revisions), Wagtail's log of them, the
    sections an article moves between, and the sequences new rows draw from."""
    facts = task.facts
    if task.kind == "write_article":  # the new page (found by its title) and its section's child count
        written = ArticlePage.objects.filter(title=facts["title"]).values_list("id", flat=True)
        pages = {*written, _section(facts["section"]).id}
    else:
        pages = set(facts["pages"]) if "pages" in facts else {facts["page"]}
    if task.kind == "archive":
        pages |= {_section(facts["section"]).id, _section(ARCHIVE).id}
    keys = {str(p) for p in pages}
    return Expectation(
        (
            Allow.changed("wagtailcore_page", where=lambda row: row["id"] in pages),
            Allow.changed("news_articlepage", where=lambda row: row["page_ptr_id"] in pages),
            *(
                (
                    Allow.added("wagtailcore_page", where=lambda row: row["id"] in pages),
                    Allow.added("news_articlepage", where=lambda row: row["page_ptr_id"] in pages),
                )
                if task.kind == "write_article"
                else ()
            ),
            Allow.any("wagtailcore_revision", where=lambda row: row["object_id"] in keys),
            Allow.added("wagtailcore_pagelogentry", where=lambda row: row["page_id"] in pages),
            Allow.changed(f"{SEQUENCES_PREFIX}public"),
        )
    )


def reference(task: EditorTask) -> list[dict[str, JSON]]:
    """A script that solves ``task`` with the editor's tools."""
    facts = task.facts
    if task.kind == "publish_drafts":
        steps: list[dict[str, JSON]] = [{"tool": "publish", "id": p} for p in facts["pages"]]
    elif task.kind == "fix_title":
        steps = [
            {"tool": "edit", "id": facts["page"], "title": facts["right"]},
            {"tool": "publish", "id": facts["page"]},
        ]
    elif task.kind == "write_article":
        steps = [
            {"tool": "create", "section": facts["section"], "title": facts["title"],
             "summary": facts["summary"], "publish": True}
        ]  # fmt: skip
    else:
        steps = [{"tool": "move", "id": p, "section": ARCHIVE} for p in facts["pages"]]
    return [*steps, {"tool": "submit"}]


def _section(name: str) -> Page:
    return SectionPage.objects.get(title=name)


def _corrected(title: str) -> str:
    """``title`` with every misspelling ``TYPOS`` knows put right."""
    wrong = {typo: word for word, typo in TYPOS.items()}
    return " ".join(
        (wrong[w.lower()].capitalize() if w[0].isupper() else wrong[w.lower()]) if w.lower() in wrong else w
        for w in title.split(" ")
    )
