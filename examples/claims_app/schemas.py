"""Request bodies. Validation is strict enough that bad input is a 422, never a database error."""

from datetime import date
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field


def _no_nul(value: str) -> str:
    # PostgreSQL text cannot hold NUL; refuse it here instead of failing in the driver.
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


def _iso_date_string(value: object) -> object:
    # Accept only "YYYY-MM-DD" strings (pydantic would also take Unix timestamps).
    if isinstance(value, date):
        return value
    if not isinstance(value, str):
        raise ValueError("must be an ISO date string (YYYY-MM-DD)")
    return value


def _decimal_input(value: object) -> object:
    # Amounts come as "123.45" or a JSON number; booleans and other types are refused.
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise ValueError("must be a decimal number or string")
    return value


NoNul = AfterValidator(_no_nul)
IsoDate = Annotated[date, BeforeValidator(_iso_date_string)]
Amount = Annotated[Decimal, BeforeValidator(_decimal_input), Field(gt=0, max_digits=12, decimal_places=2)]
Priority = Literal["low", "normal", "high"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class LoginRequest(_Body):
    model_config = ConfigDict(extra="forbid")  # passwords are taken verbatim, spaces included

    username: Annotated[str, Field(min_length=1, max_length=64), NoNul]
    password: Annotated[str, Field(min_length=1, max_length=256), NoNul]


class SubmitClaimRequest(_Body):
    policy_number: Annotated[str, Field(min_length=1, max_length=32), NoNul]
    incident_date: IsoDate
    amount: Amount
    description: Annotated[str, Field(min_length=1, max_length=5000), NoNul]
    loss_line1: Annotated[str, Field(min_length=1, max_length=200), NoNul]
    loss_city: Annotated[str, Field(min_length=1, max_length=100), NoNul]
    loss_postcode: Annotated[str, Field(min_length=1, max_length=20), NoNul]
    loss_country: Annotated[str, Field(pattern=r"^[A-Za-z]{2}$")]


class NoteRequest(_Body):
    body: Annotated[str, Field(min_length=1, max_length=5000), NoNul]


class TriageRequest(_Body):
    priority: Priority | None = None


class ApproveRequest(_Body):
    reason: Annotated[str, Field(min_length=1, max_length=2000), NoNul] | None = None


class DenyRequest(_Body):
    reason: Annotated[str, Field(min_length=1, max_length=2000), NoNul]
