"""Linear-time checkers for the ``format`` values the strict subset supports.

``format`` is asserted (strict mode promises it), following the JSON Schema Test Suite's
``optional/format`` cases: date-time, time, date, duration (RFC 3339), email (RFC 5321
mailbox incl. quoted local parts and address literals), hostname (RFC 1123 + IDNA 2008
A-labels), ipv4, ipv6, uuid, and uri (RFC 3986, ASCII only; strict only in the Messages
dialect). Every checker is a fixed, unambiguous pattern (linear time) plus bounded
arithmetic, or a length-capped parse (see ``_rx``); non-strings are not checked (the
suite's "all string formats ignore integers" cases).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType

import idna

__all__ = ["FORMATS", "check_format"]


def _rx(pattern: str) -> re.Pattern[str]:
    # Our own fixed patterns: every quantified atom is followed by a disjoint atom or by a
    # literal, so the backtracking engine does linear work; inputs are also capped at
    # _MAX_LEN. fullmatch (never ``$``, which would accept a trailing newline).
    return re.compile(pattern.removeprefix("^").removesuffix("$"), re.ASCII)


_DATE = _rx(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})$")
_TIME = _rx(
    r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))$"
)
_DURATION = _rx(
    r"^P(?:(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
    r"(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
    r"|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
    r"|[0-9]+W)$"
)
_UUID = _rx(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_IPV4 = _rx(
    r"^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}"
    r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$"
)
_LABEL = _rx(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
# RFC 5322 dot-atom local part, and a quoted string (printable ASCII, quoted-pairs).
_DOT_ATOM = _rx(r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$")
_QUOTED = _rx(r'^"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"$')

# RFC 3986: a scheme, and the character sets of each URI part (pct-encoded triplets apart).
_SCHEME = _rx(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_UNRESERVED_SUB = r"A-Za-z0-9\-._~!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PATH = _rx(rf"^(?:[{_UNRESERVED_SUB}:@/]|{_PCT})*$")
_QUERY = _rx(rf"^(?:[{_UNRESERVED_SUB}:@/?]|{_PCT})*$")
_USERINFO = _rx(rf"^(?:[{_UNRESERVED_SUB}:]|{_PCT})*$")
_REG_NAME = _rx(rf"^(?:[{_UNRESERVED_SUB}]|{_PCT})*$")
_PORT = _rx(r"^[0-9]*$")
_IPV_FUTURE = _rx(rf"^v[0-9A-Fa-f]+\.[{_UNRESERVED_SUB}:]+$")

_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_MAX_LEN = 1024  # no other supported format is longer; longer strings are rejected unparsed
_MAX_URI_LEN = 8192  # browsers' and servers' common URL limit; the uri checks are linear


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def is_date(value: str) -> bool:
    m = _DATE.fullmatch(value)
    if m is None:
        return False
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not 1 <= month <= 12:
        return False
    limit = 29 if month == 2 and _is_leap(year) else _DAYS[month - 1]
    return 1 <= day <= limit


def is_time(value: str) -> bool:
    m = _TIME.fullmatch(value)
    if m is None:
        return False
    hour, minute, second = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if hour > 23 or minute > 59 or second > 60:
        return False
    offset = 0
    if m.group(4) is None:
        off_h, off_m = int(m.group(6)), int(m.group(7))
        if off_h > 23 or off_m > 59:
            return False
        offset = (off_h * 60 + off_m) * (1 if m.group(5) == "+" else -1)
    if second == 60:
        # A leap second exists only at 23:59:60 UTC.
        return (hour * 60 + minute - offset) % 1440 == 23 * 60 + 59
    return True


def is_date_time(value: str) -> bool:
    if len(value) < 11 or value[10] not in "Tt":
        return False
    return is_date(value[:10]) and is_time(value[11:])


def is_duration(value: str) -> bool:
    return _DURATION.fullmatch(value) is not None


def is_uuid(value: str) -> bool:
    return _UUID.fullmatch(value) is not None


def is_ipv4(value: str) -> bool:
    return _IPV4.fullmatch(value) is not None


def is_ipv6(value: str) -> bool:
    if len(value) > 45 or not value.isascii() or "%" in value or "/" in value:
        return False
    if any(c.isspace() for c in value):
        return False
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    if "." in value:  # the embedded IPv4 part must itself be a valid ipv4
        return is_ipv4(value.rsplit(":", 1)[1])
    return True


def is_hostname(value: str) -> bool:
    if not value or len(value) > 253 or not value.isascii():
        return False
    for label in value.split("."):
        if _LABEL.fullmatch(label) is None:
            return False
        if label[2:4] == "--":
            if label[:4].lower() != "xn--":
                return False
            try:
                idna.decode(label)
            except (idna.IDNAError, UnicodeError, ValueError):
                return False
    return True


def is_email(value: str) -> bool:
    at = value.rfind("@")
    if at <= 0 or at == len(value) - 1:
        return False
    local, domain = value[:at], value[at + 1 :]
    if len(local) > 64:
        return False
    if local.startswith('"'):
        if _QUOTED.fullmatch(local) is None:
            return False
    elif _DOT_ATOM.fullmatch(local) is None:
        return False
    if domain.startswith("[") and domain.endswith("]"):
        literal = domain[1:-1]
        if literal[:5].lower() == "ipv6:":
            return is_ipv6(literal[5:])
        return is_ipv4(literal)
    return is_hostname(domain)


def is_uri(value: str) -> bool:
    """An absolute URI (RFC 3986 ``URI``): scheme, then hier-part, query and fragment."""
    if not value.isascii():
        return False
    scheme = _SCHEME.match(value)
    if scheme is None:
        return False
    rest, _, fragment = value[scheme.end() :].partition("#")
    hier, _, query = rest.partition("?")
    if _QUERY.fullmatch(fragment) is None or _QUERY.fullmatch(query) is None:
        return False
    if not hier.startswith("//"):
        return _PATH.fullmatch(hier) is not None
    authority, slash, path = hier[2:].partition("/")
    if _PATH.fullmatch(slash + path) is None:
        return False
    userinfo, at, hostport = authority.rpartition("@")
    if at and _USERINFO.fullmatch(userinfo) is None:
        return False
    return _host_port(hostport)


def _host_port(hostport: str) -> bool:
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            return False
        literal, port = hostport[1:end], hostport[end + 1 :]
        if not (is_ipv6(literal) or _IPV_FUTURE.fullmatch(literal) is not None):
            return False
        return port == "" or (port[0] == ":" and _PORT.fullmatch(port[1:]) is not None)
    host, _, port = hostport.partition(":")
    return _REG_NAME.fullmatch(host) is not None and _PORT.fullmatch(port) is not None


def _capped(check: Callable[[str], bool], limit: int = _MAX_LEN) -> Callable[[str], bool]:
    def capped(value: str) -> bool:
        return len(value) <= limit and check(value)

    return capped


FORMATS: Mapping[str, Callable[[str], bool]] = MappingProxyType(
    {
        "date-time": _capped(is_date_time),
        "time": _capped(is_time),
        "date": _capped(is_date),
        "duration": _capped(is_duration),
        "email": _capped(is_email),
        "hostname": _capped(is_hostname),
        "ipv4": _capped(is_ipv4),
        "ipv6": _capped(is_ipv6),
        "uuid": _capped(is_uuid),
        "uri": _capped(is_uri, _MAX_URI_LEN),
    }
)


def check_format(name: str, value: str) -> bool:
    """True when ``value`` is a valid ``name`` (a key of ``FORMATS``, else KeyError)."""
    return FORMATS[name](value)
