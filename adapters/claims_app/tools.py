"""The agent's tools: each one is a call on the claims application's own HTTP API, in-process (``ROUTES``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from statekit.kit import Route, Tool

_REF = {
    "type": "string",
    "pattern": "^CLM-[0-9]{6}$",
    "maxLength": 10,  # with the pattern: no trailing newline, whichever regex dialect a client uses
    "description": "claim reference, e.g. CLM-000042",
}
FILE_CLAIM_FIELDS = (
    "policy_number",
    "incident_date",
    "amount",
    "description",
    "loss_line1",
    "loss_city",
    "loss_postcode",
    "loss_country",
)
_STATUS = {"type": "string", "enum": ["submitted", "triaged", "approved", "denied", "paid"]}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


TOOLS = [
    Tool(
        "list_claims",
        "List or search claims, newest first. Filters: status, free text q (reference, description, "
        "customer name), assigned_to_me; paginate with limit/offset.",
        _schema(
            {
                "status": _STATUS,
                "q": {"type": "string", "maxLength": 200},
                "assigned_to_me": {"type": "boolean"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "offset": {"type": "integer", "minimum": 0},
            },
            [],
        ),
        read_only=True,
    ),
    Tool(
        "get_claim",
        "Show one claim with its policy, notes, documents and payments.",
        _schema({"reference": _REF}, ["reference"]),
        read_only=True,
    ),
    Tool(
        "add_note",
        "Add a note to a claim assigned to you.",
        _schema(
            {"reference": _REF, "body": {"type": "string", "minLength": 1, "maxLength": 5000}},
            ["reference", "body"],
        ),
    ),
    Tool(
        "triage",
        "Move a submitted claim to triaged, optionally setting its priority.",
        _schema(
            {"reference": _REF, "priority": {"type": "string", "enum": ["low", "normal", "high"]}},
            ["reference"],
        ),
    ),
    Tool(
        "approve",
        "Approve a triaged claim; the application checks the filing window, policy dates and coverage.",
        _schema({"reference": _REF, "reason": {"type": "string", "maxLength": 2000}}, ["reference"]),
    ),
    Tool(
        "deny",
        "Deny a submitted or triaged claim with a reason.",
        _schema(
            {"reference": _REF, "reason": {"type": "string", "minLength": 1, "maxLength": 2000}},
            ["reference", "reason"],
        ),
    ),
    Tool(
        "request_payment",
        "Request payment of an approved claim.",
        _schema({"reference": _REF}, ["reference"]),
    ),
    Tool(
        "file_claim",
        "File a new claim for a policyholder (the application validates the loss address and "
        "queues fraud scoring).",
        _schema(
            {
                "policy_number": {"type": "string", "minLength": 1, "maxLength": 32},
                "incident_date": {
                    "type": "string",
                    "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
                    "maxLength": 10,
                },
                "amount": {"type": "string", "pattern": "^[0-9]{1,10}([.][0-9]{1,2})?$", "maxLength": 13},
                "description": {"type": "string", "minLength": 1, "maxLength": 5000},
                "loss_line1": {"type": "string", "minLength": 1, "maxLength": 200},
                "loss_city": {"type": "string", "minLength": 1, "maxLength": 100},
                "loss_postcode": {"type": "string", "minLength": 1, "maxLength": 20},
                "loss_country": {"type": "string", "pattern": "^[A-Za-z]{2}$", "maxLength": 2},
            },
            list(FILE_CLAIM_FIELDS),
        ),
    ),
    Tool(
        "upload_document",
        "Attach a text document (a report, an estimate) to a claim assigned to you.",
        _schema(
            {
                "reference": _REF,
                "filename": {"type": "string", "minLength": 1, "maxLength": 120},
                "content": {"type": "string", "minLength": 1, "maxLength": 100_000},
            },
            ["reference", "filename", "content"],
        ),
    ),
    Tool(
        "wait",
        "Let time pass (whole hours) before the next action; background jobs that fall due then run.",
        _schema({"hours": {"type": "integer", "minimum": 1, "maximum": 72}}, ["hours"]),
    ),
    Tool(
        "submit",
        "Finish the task. Call it once you are done; the episode ends and is scored.",
        _schema({"summary": {"type": "string", "maxLength": 2000}}, []),
    ),
]


def upload_of(args: Mapping[str, Any]) -> dict[str, tuple[str, bytes, str]]:
    """The multipart file of an ``upload_document`` call."""
    return {"file": (str(args["filename"]), str(args["content"]).encode(), "text/plain")}


ROUTES = {
    "list_claims": Route("GET", "/claims"),
    "get_claim": Route("GET", "/claims/{reference}"),
    "add_note": Route("POST", "/claims/{reference}/notes"),
    "triage": Route("POST", "/claims/{reference}/triage"),
    "approve": Route("POST", "/claims/{reference}/approve"),
    "deny": Route("POST", "/claims/{reference}/deny"),
    "request_payment": Route("POST", "/claims/{reference}/payment-request", body=()),
    "upload_document": Route("POST", "/claims/{reference}/documents", files=upload_of),
    "file_claim": Route("POST", "/claims"),
}
"""Each API tool as a request on the application's own HTTP API (``wait`` and ``submit`` are statekit's)."""
