"""Engine and session plumbing."""

from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session, sessionmaker

from .models import Base


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite connections are shared with the worker thread."""
    if url.startswith("sqlite"):
        return create_engine(url, connect_args={"check_same_thread": False})
    return create_engine(url, pool_pre_ping=True)


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions keep loaded objects usable after commit, so views can be built after the transaction."""
    return sessionmaker(engine, expire_on_commit=False)


def create_schema(engine: Engine, *, checkfirst: bool = True) -> None:
    """Create every table and the claim reference sequence (no-op for what already exists, unless
    ``checkfirst`` is off: then the database must be empty, and nothing is probed first)."""
    Base.metadata.create_all(engine, checkfirst=checkfirst)
