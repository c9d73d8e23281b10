"""The command line: ``seed`` and ``serve`` run as real subprocesses."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from statekit_examples.apps.claims_app.config import Settings
from statekit_examples.apps.claims_app.db import create_schema, make_engine, make_session_factory
from statekit_examples.apps.claims_app.fixtures import FixtureSummary, generate
from statekit_examples.apps.claims_app.models import Adjuster, Claim, Customer, Policy

from .helpers import active_policy_number, claim_payload

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "statekit_examples.apps.claims_app", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_seed_command_fills_an_empty_database_once(fresh_db_url: str, tmp_path: Path) -> None:
    result = run_cli("seed", "--db", fresh_db_url, "--seed", "5", "--upload-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["counts"]["claims"] == 150
    assert "adjuster" in summary["adjusters"]
    engine = make_engine(fresh_db_url)
    try:
        with make_session_factory(engine)() as session:
            assert session.scalar(select(func.count()).select_from(Claim)) == 150
        again = run_cli("seed", "--db", fresh_db_url, "--seed", "6")
        assert again.returncode == 2
        assert "already has data" in again.stderr
        with make_session_factory(engine)() as session:
            assert session.scalar(select(func.count()).select_from(Claim)) == 150
    finally:
        engine.dispose()


def _content(url: str) -> dict[str, Any]:
    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as session:
            return {
                "customers": session.scalars(select(Customer.full_name).order_by(Customer.full_name)).all(),
                "policies": session.scalars(
                    select(Policy.policy_number).order_by(Policy.policy_number)
                ).all(),
                "adjusters": session.scalars(select(Adjuster.username).order_by(Adjuster.username)).all(),
                "claims": [
                    tuple(row)
                    for row in session.execute(
                        select(
                            Claim.reference, Claim.amount, Claim.status, Claim.priority, Claim.description
                        ).order_by(Claim.reference)
                    )
                ],
            }
    finally:
        engine.dispose()


def test_same_seed_gives_the_same_world(pg_cluster: Any) -> None:
    names = [f"claims_seed_{uuid.uuid4().hex[:10]}" for _ in range(3)]
    try:
        urls = [pg_cluster.create_database(name) for name in names]
        for url, seed in zip(urls, (7, 7, 8), strict=True):
            engine = make_engine(url)
            create_schema(engine)
            with make_session_factory(engine).begin() as session:
                generate(session, seed=seed)
            engine.dispose()
        first, second, other = (_content(url) for url in urls)
        assert first == second
        assert len(first["customers"]) == 40 and len(first["policies"]) == 60
        assert other["customers"] != first["customers"]
        assert other["policies"] != first["policies"]
    finally:
        for name in names:
            pg_cluster.drop_database(name)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_command_serves_the_api_and_runs_the_worker(
    settings: Settings,
    seeded: FixtureSummary,
    session_factory: sessionmaker[Session],
    tmp_path: Path,
) -> None:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "serve.log"
    env = os.environ | {"CLAIMS_WORKER_POLL_SECONDS": "0.2"}
    args = [
        "serve",
        "--db",
        settings.db_url,
        "--port",
        str(port),
        "--upload-dir",
        str(settings.upload_dir),
        "--fraud-url",
        settings.fraud_url,
        "--payment-url",
        settings.payment_url,
        "--address-url",
        settings.address_url,
    ]
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "statekit_examples.apps.claims_app", *args],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, log_path.read_text()
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.1)
        with httpx.Client(base_url=base, timeout=10) as http:
            login = http.post("/auth/login", json={"username": "adjuster", "password": seeded.password})
            assert login.status_code == 200
            headers = {"Authorization": f"Bearer {login.json()['token']}"}
            assert http.get("/claims", headers=headers).json()["total"] == 150
            created = http.post(
                "/claims", json=claim_payload(active_policy_number(session_factory)), headers=headers
            )
            assert created.status_code == 201, created.text
            reference = created.json()["reference"]
            while http.get(f"/claims/{reference}", headers=headers).json()["fraud_score"] is None:
                assert time.monotonic() < deadline + 30, "the server's worker never scored the claim"
                time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 0, log_path.read_text()


def test_vendors_command_serves_the_stubs(tmp_path: Path) -> None:
    port = _free_port()
    log_path = tmp_path / "vendors.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "statekit_examples.apps.claims_app", "vendors", "--port", str(port)],
            cwd=REPO,
            stdout=log,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, log_path.read_text()
            try:
                response = httpx.post(
                    f"http://127.0.0.1:{port}/address/v1/validate",
                    json={"line1": "1 Main St", "city": "X", "postcode": "1", "country": "US"},
                    headers={"Authorization": "Bearer k"},
                    timeout=1,
                )
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.1)
        assert response.status_code == 200 and response.json()["valid"] is True
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 0
