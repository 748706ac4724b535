"""Values that must never be written to a record or a log, nor shown on a terminal.

Runtime policy is recorded by value (that is what makes a receipt useful), but
an environment also carries credentials: a hub token passed with `--env`, an
index URL with a password in it. A variable whose name says it holds a
secret is recorded by name only, and credentials inside URLs are cut out of
every other value. The process itself still gets the real value: only what is
written down is redacted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

REDACTED = "<redacted>"
SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW(OR)?D|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|AUTH|COOKIE"
    r"|(^|_)(KEY|PASS|PASSPHRASE)$",
    re.I,
)
# user:password@ up to the last @ before the path (a password may itself contain @)
URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s]*@")
# signed URLs and token query parameters (?token=..., &X-Amz-Signature=..., &sig=...)
URL_QUERY_SECRET = re.compile(
    r"(?P<key>[?&](?:[\w.-]*(?:token|signature|secret|password|credential)[\w.-]*|sig|key)=)"
    r"[^&\s#]*",
    re.I,
)


def is_secret(name: str) -> bool:
    """True for a variable whose name says it holds a credential."""
    return bool(SECRET_NAME.search(name))


def value(name: str, text: str) -> str:
    """`text` as it may be written down for the variable `name`."""
    if is_secret(name):
        return REDACTED
    text = URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", str(text))
    return URL_QUERY_SECRET.sub(lambda m: f"{m.group('key')}{REDACTED}", text)


def env(variables: Mapping[str, str]) -> dict[str, str]:
    """An environment as it may be written down: same names, secret values redacted."""
    return {k: value(k, v) for k, v in variables.items()}
