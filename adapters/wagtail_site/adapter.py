"""The news site's adapter: Wagtail's migrations are its schema stage (built once per fingerprint,
cloned for every seed), and a seed's content is written through Wagtail's own API. The agent is the
site's editor: its tools are what Wagtail's admin does on a page (save a revision, publish it,
unpublish, move), called through the same action classes the admin's views call, as the editor's
user.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from statekit.kit import (
    JSON,
    CheckHints,
    DigestSpec,
    EnvSettings,
    Episode,
    Expectation,
    Outcome,
    SchemaStage,
    SqlAdapter,
    Task,
    Tool,
    World,
)
from statekit_examples.adapters.wagtail_site import PROJECT, content, tasks
from statekit_examples.apps.wagtail_site.news.models import ArticlePage, SectionPage

SPEC = DigestSpec.load(Path(__file__).with_name("wagtail.toml"))
OBJECT: dict[str, JSON] = {"type": "object", "additionalProperties": False}
PAGE_ID: dict[str, JSON] = {"type": "integer", "minimum": 1}
SECTION: dict[str, JSON] = {"enum": [*content.SECTIONS, content.ARCHIVE]}
TOOLS = [
    Tool(
        "list_pages",
        "The articles of a section (or of every section): id, title, date, whether live and whether a "
        "draft waits.",
        {**OBJECT, "properties": {"section": SECTION}},
        read_only=True,
    ),
    Tool(
        "read_page",
        "One article: its live title, slug, section, date, summary and body, and its latest draft's "
        "title and summary.",
        {**OBJECT, "properties": {"id": PAGE_ID}, "required": ["id"]},
        read_only=True,
    ),
    Tool(
        "edit",
        "Save a new draft revision of an article with the given fields changed (not published).",
        {
            **OBJECT,
            "properties": {
                "id": PAGE_ID,
                "title": {"type": "string", "minLength": 1, "maxLength": 255},
                "summary": {"type": "string", "maxLength": 250},
            },
            "required": ["id"],
        },
    ),
    Tool(
        "create",
        "Write a new article in a section, dated today: saved as a draft, or published with publish=true.",
        {
            **OBJECT,
            "properties": {
                "section": SECTION,
                "title": {"type": "string", "minLength": 1, "maxLength": 255},
                "summary": {"type": "string", "maxLength": 250},
                "publish": {"type": "boolean"},
            },
            "required": ["section", "title"],
        },
    ),
    Tool(
        "publish",
        "Publish an article's latest revision.",
        {**OBJECT, "properties": {"id": PAGE_ID}, "required": ["id"]},
    ),
    Tool(
        "unpublish",
        "Take an article off the site.",
        {**OBJECT, "properties": {"id": PAGE_ID}, "required": ["id"]},
    ),
    Tool(
        "move",
        "Move an article into a section (as its last article).",
        {**OBJECT, "properties": {"id": PAGE_ID, "section": SECTION}, "required": ["id", "section"]},
    ),
    Tool("submit", "Finish the task.", OBJECT),
]


class EditorEpisode(Episode):
    """The editor on one world: every call runs on the calling thread's connection to it."""

    def __init__(self, world: World, url: str, task: tasks.EditorTask) -> None:
        self.world, self.url, self.task, self.tools = world, url, task, TOOLS

    def observe(self) -> JSON:
        return {"task": self.task.prompt, "sections": [*content.SECTIONS, content.ARCHIVE]}

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        if tool == "submit":
            return Outcome({"submitted": True}, done=True)
        with PROJECT.on(self.url):
            try:
                with transaction.atomic():  # a call that fails half-way leaves nothing behind
                    return Outcome(TOOL_CALLS[tool](arguments))
            except ObjectDoesNotExist:
                return Outcome({"error": f"no article with id {arguments.get('id')}"})
            except (ValidationError, PermissionDenied, ValueError) as exc:
                return Outcome({"error": f"{type(exc).__name__}: {exc}"})

    def score(self) -> float:
        with PROJECT.on(self.url):
            return tasks.score(self.task)

    def expected_changes(self) -> Expectation:
        with PROJECT.on(self.url):
            return tasks.expected(self.task)

    def quiesce(self) -> None:
        PROJECT.ended(self.url)

    def close(self) -> None:
        # before the rewind: the connection is reset and kept through it (a warm backend for the next
        # episode on this world), or, if it cannot be, ended (an open one the rewind ends is slower)
        if not PROJECT.keep(self.url, self.world):
            PROJECT.ended(self.url)


def _editor() -> User:
    return User.objects.get(username=content.EDITOR)


def _article(arguments: dict[str, JSON]) -> ArticlePage:
    return ArticlePage.objects.get(id=arguments["id"])


def _list_pages(arguments: dict[str, JSON]) -> JSON:
    pages = ArticlePage.objects.order_by("path")
    if "section" in arguments:
        pages = pages.child_of(SectionPage.objects.get(title=arguments["section"]))
    return {
        "articles": [
            {
                "id": p.id,
                "title": p.title,
                "section": p.get_parent().title,
                "date": p.date.isoformat(),
                "live": p.live,
                "draft_waiting": p.has_unpublished_changes,
            }
            for p in pages
        ]
    }


def _read_page(arguments: dict[str, JSON]) -> JSON:
    page = _article(arguments)
    draft = page.get_latest_revision_as_object()
    return {
        "id": page.id,
        "title": page.title,
        "slug": page.slug,
        "section": page.get_parent().title,
        "date": page.date.isoformat(),
        "summary": page.summary,
        "body": page.body,
        "live": page.live,
        "draft": {"title": draft.title, "summary": draft.summary} if page.has_unpublished_changes else None,
    }


def _edit(arguments: dict[str, JSON]) -> JSON:
    draft = _article(arguments).get_latest_revision_as_object()
    for name in ("title", "summary"):
        if name in arguments:
            setattr(draft, name, arguments[name])
    draft.full_clean()
    revision = draft.save_revision(user=_editor())
    return {"saved": True, "revision": revision.id, "published": False}


def _create(arguments: dict[str, JSON]) -> JSON:
    section = SectionPage.objects.get(title=arguments["section"])
    title = str(arguments["title"])
    article = ArticlePage(
        title=title,
        slug=slugify(title) or "article",
        date=timezone.now().date(),
        summary=str(arguments.get("summary", "")),
        live=False,
    )
    section.add_child(instance=article)  # validates: a slug already taken in the section is an error
    revision = article.save_revision(user=_editor())
    if arguments.get("publish"):
        revision.publish(user=_editor())
    return {"created": article.id, "published": bool(arguments.get("publish"))}


def _publish(arguments: dict[str, JSON]) -> JSON:
    page = _article(arguments)
    revision = page.get_latest_revision()
    if revision is None:
        raise ValueError(f"article {page.id} has no revision to publish")
    revision.publish(user=_editor())
    return {"published": True, "title": page.get_latest_revision_as_object().title}


def _unpublish(arguments: dict[str, JSON]) -> JSON:
    page = _article(arguments)
    if not page.live:
        raise ValueError(f"article {page.id} is not live")
    page.unpublish(user=_editor())
    return {"unpublished": True}


def _move(arguments: dict[str, JSON]) -> JSON:
    page = _article(arguments)
    section = SectionPage.objects.get(title=arguments["section"])
    if page.get_parent().id == section.id:
        raise ValueError(f"article {page.id} is already in {section.title}")
    page.move(section, pos="last-child", user=_editor())
    return {"moved": True, "section": section.title}


TOOL_CALLS = {
    "list_pages": _list_pages,
    "read_page": _read_page,
    "edit": _edit,
    "create": _create,
    "publish": _publish,
    "unpublish": _unpublish,
    "move": _move,
}


class WagtailAdapter(SqlAdapter, SchemaStage, CheckHints):
    """Wagtail's migrations once per fingerprint; a seed's site on a copy of them; episodes as its editor."""

    name = "wagtail_site"
    spec = SPEC
    database_prefix = "wag"
    builder_modules = (
        "statekit_examples.adapters.wagtail_site.content",
        "statekit_examples.apps.wagtail_site.news.models",
        "statekit_examples.apps.wagtail_site.settings",
    )
    deterministic_start = True  # choosing the task only reads the world
    probe_tasks = {"clock": "fix_title", "ids": "write_article"}  # a new page draws a uuid (translation_key)

    def build_schema(self, world: World) -> None:
        PROJECT.migrate(self.database_url(world))

    def build_world(self, world: World, seed: int) -> None:
        with PROJECT.building(self.database_url(world)):
            content.fill(seed)

    def attach(self, world: World, settings: EnvSettings) -> Any:
        return self.database_url(world)

    def on_rewind(self, app: Any) -> None:
        PROJECT.rewound(app)

    def detach(self, app: Any) -> None:
        PROJECT.ended(app)

    def task_kinds(self) -> list[str]:
        return list(tasks.KINDS)

    def start_episode(
        self,
        world: World,
        *,
        seed: int,
        options: dict[str, JSON],
        task: Task | None,
        app: Any,
        settings: EnvSettings,
    ) -> Episode:
        url = self.database_url(world)
        if task is None:
            kind = settings.task_kind(seed, options, tasks.KINDS)
            with PROJECT.on(url):
                task = tasks.choose(kind, seed)
        assert isinstance(task, tasks.EditorTask)
        return EditorEpisode(world, url, task)

    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        assert isinstance(task, tasks.EditorTask)
        return tasks.reference(task)
