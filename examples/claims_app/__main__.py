"""Command line: ``seed`` a database, ``serve`` the API (with its worker), or run the ``vendors`` stubs."""

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import uvicorn
from sqlalchemy import func, select

from .api import create_app
from .config import Settings
from .db import create_schema, make_engine, make_session_factory
from .fixtures import generate
from .models import Adjuster, Claim
from .vendors.app import create_vendor_app


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {__package__}", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    seed = commands.add_parser("seed", help="create the schema and fill an empty database with demo data")
    seed.add_argument(
        "--db", required=True, help="SQLAlchemy URL, e.g. postgresql+psycopg://user@host/claims"
    )
    seed.add_argument("--seed", type=int, required=True, help="random seed for names, amounts and choices")
    seed.add_argument("--scale", type=int, default=1, help="multiplier: 1 is ~150 claims, 100 is ~15,000")
    seed.add_argument("--upload-dir", type=Path, default=None, help="also write document files here")

    serve = commands.add_parser("serve", help="serve the API and run the background worker")
    serve.add_argument("--db", required=True)
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--upload-dir", type=Path, default=None)
    serve.add_argument("--fraud-url", default=None)
    serve.add_argument("--payment-url", default=None)
    serve.add_argument("--address-url", default=None)

    vendors = commands.add_parser("vendors", help="serve the fraud, payment and address vendor stubs")
    vendors.add_argument("--port", type=int, required=True)
    vendors.add_argument("--host", default="127.0.0.1")
    return parser


def seed_command(args: argparse.Namespace) -> int:
    engine = make_engine(args.db)
    try:
        create_schema(engine)
        factory = make_session_factory(engine)
        with factory.begin() as session:
            existing = (session.scalar(select(func.count()).select_from(Adjuster)) or 0) + (
                session.scalar(select(func.count()).select_from(Claim)) or 0
            )
            if existing:
                print("refusing to seed: the database already has data", file=sys.stderr)
                return 2
            started = time.perf_counter()
            summary = generate(session, seed=args.seed, scale=args.scale, upload_dir=args.upload_dir)
        report = summary.to_dict() | {"seconds": round(time.perf_counter() - started, 2)}
        print(json.dumps(report, indent=2))
        return 0
    finally:
        engine.dispose()


def serve_command(args: argparse.Namespace) -> int:
    settings = Settings.from_env(
        db_url=args.db,
        upload_dir=args.upload_dir,
        fraud_url=args.fraud_url,
        payment_url=args.payment_url,
        address_url=args.address_url,
    )
    engine = make_engine(settings.db_url)
    create_schema(engine)
    engine.dispose()
    app = create_app(settings, start_worker=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


def vendors_command(args: argparse.Namespace) -> int:
    uvicorn.run(create_vendor_app(), host=args.host, port=args.port, log_level="info")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = _parser().parse_args(argv)
    handlers = {"seed": seed_command, "serve": serve_command, "vendors": vendors_command}
    return handlers[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
