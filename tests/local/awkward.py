"""A fixed set of awkward strict-tool prompts for the local model (tests and benchmark).

Each case pairs a strict tool whose schema is easy to get slightly wrong (patterns, enums,
integer units, nullable fields, bounded arrays) with a prompt that invites the mistake
(pounds for pence, "#58-2131" for a six-digit order number, "urgent!!!" for an enum).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def _obj(props: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


REFUND = {
    "name": "create_refund",
    "description": "Refund part or all of an order.",
    "strict": True,
    "parameters": _obj(
        {
            "order_number": {"type": "string", "pattern": "^[0-9]{6}$"},
            "amount_pence": {"type": "integer", "minimum": 1},
            "reason": {"type": "string", "enum": ["damaged", "late", "wrong_item", "other"]},
            "note": {"type": ["string", "null"], "maxLength": 200},
        }
    ),
}

MEETING = {
    "name": "book_meeting",
    "description": "Book a meeting room.",
    "strict": True,
    "parameters": _obj(
        {
            "date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
            "start_time": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"},
            "duration_minutes": {"type": "integer", "enum": [15, 30, 45, 60]},
            "attendees": {
                "type": "array",
                "items": {"type": "string", "pattern": "^[a-z]+@example\\.com$"},
                "minItems": 1,
                "maxItems": 5,
            },
        }
    ),
}

THERMOSTAT = {
    "name": "set_thermostat",
    "description": "Set a room's heating.",
    "strict": True,
    "parameters": _obj(
        {
            "room": {"type": "string", "enum": ["kitchen", "bedroom", "office"]},
            "celsius": {"type": "number", "minimum": 5, "maximum": 30},
            "mode": {"type": "string", "enum": ["heat", "cool", "off"]},
        }
    ),
}

TRANSFER = {
    "name": "transfer_money",
    "description": "Move money between the customer's accounts.",
    "strict": True,
    "parameters": _obj(
        {
            "from_account": {"type": "string", "pattern": "^ACC-[0-9]{4}$"},
            "to_account": {"type": "string", "pattern": "^ACC-[0-9]{4}$"},
            "amount_cents": {"type": "integer", "minimum": 1},
            "currency": {"type": "string", "enum": ["GBP", "EUR", "USD"]},
        }
    ),
}

TICKET = {
    "name": "create_ticket",
    "description": "Open a support ticket.",
    "strict": True,
    "parameters": _obj(
        {
            "title": {"type": "string", "maxLength": 40},
            "priority": {"type": "string", "enum": ["p0", "p1", "p2", "p3"]},
            "tags": {
                "type": "array",
                "items": {"type": "string", "enum": ["billing", "bug", "login", "other"]},
                "maxItems": 2,
            },
            "customer": _obj(
                {
                    "id": {"type": "integer"},
                    "email": {"type": ["string", "null"]},
                }
            ),
        }
    ),
}


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    tool: dict[str, Any]
    prompt: str

    def wire_tool(self) -> dict[str, Any]:
        return {"type": "function", "function": self.tool}

    @property
    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = self.tool["parameters"]
        return schema


CASES: tuple[Case, ...] = (
    Case("refund-pounds", REFUND, "Order 582131 arrived crushed, please refund the £12.50 pot."),
    Case("refund-hash", REFUND, "Refund #58-2131, twelve quid, it came a week late."),
    Case("refund-words", REFUND, "order five eight two one three one: refund nine pounds 99p"),
    Case(
        "refund-reason",
        REFUND,
        "Refund 100200 for 3.00 GBP because the customer changed "
        "their mind and also it was the wrong colour and late.",
    ),
    Case("refund-long-note", REFUND, "Refund 123456, £1. Note: " + "very " * 60 + "unhappy."),
    Case("refund-letters", REFUND, "Please refund order AB1234 in full, it was £40."),
    Case(
        "meeting-relative",
        MEETING,
        "Book me a room next Tuesday at half past three for "
        "an hour and a half with Bob and alice@example.com.",
    ),
    Case(
        "meeting-pm",
        MEETING,
        "Meeting on 3rd March 2025 at 2pm for 20 mins with ALICE@EXAMPLE.COM.",
    ),
    Case("meeting-nobody", MEETING, "Reserve a room tomorrow at 9 for a quick sync, just me."),
    Case(
        "meeting-many",
        MEETING,
        "2025-07-01 at 10:00, 45 minutes, invite a@example.com, "
        "b@example.com, c@example.com, d@example.com, e@example.com, f@example.com.",
    ),
    Case("thermo-fahrenheit", THERMOSTAT, "Make the lounge 72 degrees Fahrenheit please."),
    Case("thermo-hot", THERMOSTAT, "Crank the office heating up to 35!"),
    Case("thermo-auto", THERMOSTAT, "Set the bedroom to auto mode, around nineteen and a half."),
    Case("transfer-euros", TRANSFER, "Send 15.75 euros from account 1234 to ACC-9876."),
    Case("transfer-dollar", TRANSFER, "Move $1,200 from ACC-0001 into my savings ACC-42."),
    Case("transfer-yen", TRANSFER, "Transfer 5000 yen from ACC-1111 to ACC-2222."),
    Case(
        "ticket-urgent",
        TICKET,
        "URGENT!!! customer 1042 (no email on file) can't log in "
        "and was double billed, open a ticket titled 'Customer cannot log in after the "
        "password reset and was charged twice'.",
    ),
    Case(
        "ticket-tags",
        TICKET,
        "Open a low priority ticket for customer id 'C-77' "
        "(c77@example.com) about a UI bug, tags: ui, bug, cosmetic, frontend.",
    ),
    Case("ticket-sev", TICKET, "sev1 ticket: checkout broken for customer #9, email unknown."),
    Case("ticket-vague", TICKET, "Make a ticket for the thing we talked about."),
    Case("refund-negative", REFUND, "Order 654321: the customer owes us £5, refund -500 pence."),
    Case("transfer-split", TRANSFER, "Transfer half of 99.99 GBP from ACC-1234 to ACC-5678."),
)
