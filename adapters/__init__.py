"""Adapters: one package per wrapped application."""
