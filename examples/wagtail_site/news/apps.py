from django.apps import AppConfig


class NewsConfig(AppConfig):
    name = "statekit_examples.apps.wagtail_site.news"
    label = "news"
    default_auto_field = "django.db.models.BigAutoField"
